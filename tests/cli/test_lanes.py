"""The CLI with lanes: status per pool and lane, --pool/--lane on live control, enqueue --lane."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from dispatcher.local.account import REGION, pointed_at
from dispatcher.local.emulation import Emulation
from dispatcher.local.events import event_from_description
from dispatcher.local.stack import create_lane, create_stack, register_stack, send_jobs
from tests.support.cli_runner import Cli


@dataclass
class Laned:
    """A stack with lanes: ``urgent`` shares the default state machine, ``glue`` has its own pool."""

    cli: Cli
    lanes: dict[str, dict[str, Any]]
    document: str


@pytest.fixture
def laned(emulated: tuple[str, Emulation]) -> Iterator[Laned]:
    """A stack with lanes and pools, in the emulator, and the CLI pointed at it."""
    endpoint_url, _ = emulated
    name = f"lanes-{uuid.uuid4().hex[:8]}"
    boto3.setup_default_session()
    with pointed_at(endpoint_url):
        stack = create_stack(name)
        urgent = create_lane(name, "urgent", state_machine_arn=stack.state_machine_arn, priority=10)
        glue = create_lane(name, "glue", pool="glue", max_concurrency=2)
        document = json.dumps({"pools": {"glue": {"max_concurrency": 4}}, "lanes": [urgent, glue]})
        register_stack(name, stack, max_concurrency=3, lanes=document)
        yield Laned(Cli(endpoint_url, name, stack), {"urgent": urgent, "glue": glue}, document)


def _control(laned: Laned) -> dict[str, Any]:
    ssm = boto3.client("ssm", region_name=REGION)
    with pointed_at(laned.cli.endpoint_url):
        value = ssm.get_parameter(Name=laned.cli.stack.control_parameter)["Parameter"]["Value"]
    return dict(json.loads(value))


def test_status_has_a_row_per_pool_and_per_lane_and_the_top_level_is_default(laned: Laned) -> None:
    """Status has a row per pool and per lane and the top level is default."""
    cli, sfn = laned.cli, boto3.client("stepfunctions", region_name=REGION)
    with pointed_at(cli.endpoint_url):
        send_jobs(laned.lanes["urgent"]["queue_url"], [{"body": "{}", "group": "g"}])
        send_jobs(cli.stack.queue_url, [{"body": "{}", "group": f"g{index}"} for index in range(2)])
        sfn.start_execution(stateMachineArn=cli.stack.state_machine_arn, name="running-1", input="{}")
        sfn.start_execution(stateMachineArn=laned.lanes["glue"]["state_machine_arn"], name="g-1", input="{}")
    result = cli.run("status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert (status["max_concurrency"], status["running"], status["free"], status["queued"]) == (3, 1, 2, 2)
    assert status["pools"] == [
        {"name": "default", "max_concurrency": 3, "running": 1, "free": 2, "paused": False, "executions": 1},
        {"name": "glue", "max_concurrency": 4, "running": 1, "free": 3, "paused": False, "executions": 1},
    ]
    assert [(lane["name"], lane["pool"], lane["priority"], lane["queued"]) for lane in status["lanes"]] == [
        ("default", "default", 0, 2),
        ("urgent", "default", 10, 1),
        ("glue", "glue", 0, 0),
    ]
    assert status["gates"] == []
    text = cli.run("status").stdout
    assert "POOL" in text
    assert "LANE" in text
    assert any(line.split()[:3] == ["urgent", "default", "10"] for line in text.splitlines())


def test_set_max_pause_and_resume_change_only_the_named_pools_or_lanes_key(laned: Laned) -> None:
    """set-max, pause and resume change only the named pool's or lane's key."""
    cli = laned.cli
    assert cli.run("set-max", "3", "--lane", "glue").returncode == 0
    assert cli.run("pause", "--pool", "glue").returncode == 0
    result = cli.run("pause", "--lane", "urgent")
    assert result.stdout.startswith("lane urgent: paused, MAX from LANES (parameter ")
    assert _control(laned) == {
        "max_concurrency": 3,
        "paused": False,
        "pools": {"glue": {"paused": True}},
        "lanes": {"glue": {"max_concurrency": 3}, "urgent": {"paused": True}},
    }
    resumed = json.loads(cli.run("resume", "--lane", "urgent", "--json").stdout)
    assert resumed["lanes"]["urgent"] == {"paused": False}
    assert resumed["paused"] is False
    assert cli.run("set-max", "5", "--pool", "default").returncode == 0
    assert _control(laned)["max_concurrency"] == 5
    status = json.loads(cli.run("status", "--json").stdout)
    assert status["pools"][1]["paused"] is True
    assert [lane["paused"] for lane in status["lanes"]] == [False, False, True]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("set-max", "2", "--lane", "nope"), "--lane nope: no such lane (lanes: default, urgent, glue)"),
        (("pause", "--pool", "nope"), "--pool nope: no such pool (pools: default, glue)"),
        (("pause", "--gate", "g"), "--gate g: no such gate (gates: none are configured)"),
        (("set-max", "2", "--lane", "urgent"), "another lane starts the same state machine"),
        (("enqueue", "{}", "--group", "g", "--lane", "nope"), "--lane nope: no such lane"),
    ],
)
def test_a_name_that_is_not_configured_is_one_line_and_exit_2(
    laned: Laned, arguments: tuple[str, ...], message: str
) -> None:
    """A name that is not configured is one line and exit 2."""
    before = _control(laned)
    result = laned.cli.run(*arguments)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert _control(laned) == before, "nothing was written"


def test_enqueue_lane_sends_to_that_lanes_queue(laned: Laned) -> None:
    """`enqueue --lane` sends to that lane's queue."""
    cli = laned.cli
    result = cli.run("enqueue", '{"order": 1}', "--group", "g", "--lane", "urgent")
    assert result.returncode == 0, result.stderr
    sqs = boto3.client("sqs", region_name=REGION)
    with pointed_at(cli.endpoint_url):
        [message] = sqs.receive_message(QueueUrl=laned.lanes["urgent"]["queue_url"])["Messages"]
        assert message["Body"] == '{"order": 1}'
        assert "Messages" not in sqs.receive_message(QueueUrl=cli.stack.queue_url)


def test_the_cli_reads_lanes_from_the_environment_without_a_stack(laned: Laned) -> None:
    """The CLI reads lanes from the environment without a stack."""
    cli = laned.cli
    environment = cli.environment(
        **cli.stack.environment(3),
        LANES=laned.document,
    )
    status = json.loads(cli.run("status", "--json", stack=False, env=environment).stdout)
    assert [pool["name"] for pool in status["pools"]] == ["default", "glue"]
    broken = cli.environment(**cli.stack.environment(3), LANES='{"lanes": [{"name": "x"}]}')
    result = cli.run("status", stack=False, env=broken)
    assert result.returncode == 1
    assert "LANES: lanes[0].queue_url: field required;" in result.stderr
    assert result.stderr.rstrip().endswith("(the environment)")


def test_failed_names_each_failures_lane_and_rerun_queues_it_back_on_that_lanes_queue(laned: Laned) -> None:
    """`failed` names each failure's lane, and `rerun` queues it back on that lane's queue."""
    cli, glue = laned.cli, laned.lanes["glue"]
    sfn, sqs = boto3.client("stepfunctions", region_name=REGION), boto3.client("sqs", region_name=REGION)
    with pointed_at(cli.endpoint_url):
        arn = sfn.start_execution(stateMachineArn=glue["state_machine_arn"], name="g-7", input='{"n": 7}')[
            "executionArn"
        ]
        sfn.stop_execution(executionArn=arn)
        event = event_from_description(sfn.describe_execution(executionArn=arn))
        sqs.send_message(QueueUrl=cli.stack.spool_queue_url, MessageBody=json.dumps(event))
    [failure] = json.loads(cli.run("failed", "--json").stdout)["failures"]
    assert (failure["name"], failure["lane"]) == ("g-7", "glue")
    assert "glue" in cli.run("failed").stdout.splitlines()[1].split()
    result = cli.run("rerun", "--restart", "--json")
    assert result.returncode == 0, result.stderr
    with pointed_at(cli.endpoint_url):
        [message] = sqs.receive_message(QueueUrl=glue["queue_url"])["Messages"]
        assert message["Body"] == '{"n": 7}'
        assert "Messages" not in sqs.receive_message(QueueUrl=cli.stack.queue_url)
