"""Every operations command knows every member: status, info, forget, dead letters, failed and rerun.

One stack with two pools: pool default (MAX 3) holds lane default, lane ``urgent`` (the
same state machine) and gate ``crawl`` (its own MAX 2); pool ``glue`` (MAX 4) holds lane
``glue`` (its own state machine and MAX 2). The commands run in this process (`Cli.call`).
"""

from __future__ import annotations

import json
import uuid

import boto3

from dispatcher.core.messages import DISPATCH_ERROR_ATTRIBUTE, EXECUTION_NAME_ATTRIBUTE
from dispatcher.local.account import REGION, pointed_at
from dispatcher.local.events import event_from_description
from dispatcher.local.stack import read_all, send_jobs
from tests.support.members import Members, ok


def dead_letter(url: str, body: str, name: str, reason: str) -> None:
    """Puts ``body`` on dead-letter queue ``url`` as the dispatcher would, with its reason."""
    boto3.client("sqs", region_name=REGION).send_message(
        QueueUrl=url,
        MessageBody=body,
        MessageGroupId="g",
        MessageDeduplicationId=uuid.uuid4().hex,
        MessageAttributes={
            EXECUTION_NAME_ATTRIBUTE: {"DataType": "String", "StringValue": name},
            DISPATCH_ERROR_ATTRIBUTE: {"DataType": "String", "StringValue": reason},
        },
    )


# -- status -------------------------------------------------------------------------


def test_status_shows_each_gates_max_paused_state_and_dead_letters_and_max_0_reads_as_paused(
    members: Members,
) -> None:
    """A gate row has its MAX, paused and dead letters; `set-max 0` on a gate or lane shows it paused."""
    cli = members.cli
    with pointed_at(cli.endpoint_url):
        dead_letter(members.gate["dead_letter_queue_url"], "{}", "poison", "not a gate request")
    [gate] = ok(cli.run("status", "--json"))["gates"]
    assert gate == {
        "name": "crawl",
        "pool": "default",
        "inside": 0,
        "waiting": 0,
        "paused": False,
        "max_concurrency": 2,
        "dead_letters": 1,
        "settings": {},
    }
    assert ok(cli.run("set-max", "0", "--gate", "crawl")).startswith("gate crawl: paused, MAX 0")
    assert ok(cli.run("set-max", "0", "--lane", "glue")).startswith("lane glue: paused, MAX 0")
    status = ok(cli.run("status", "--json"))
    assert status["gates"][0]["paused"] is True
    assert [(lane["name"], lane["paused"], lane["max_concurrency"]) for lane in status["lanes"]] == [
        ("default", False, None),
        ("urgent", False, None),
        ("glue", True, 0),
    ]
    text = ok(cli.run("status"))
    assert any(line.split() == ["crawl", "default", "0", "yes", "0", "0", "1"] for line in text.splitlines())
    assert any(line.split()[:5] == ["glue", "glue", "0", "0", "yes"] for line in text.splitlines())


def test_status_of_one_pool_lane_or_gate_is_its_entry_and_an_unknown_name_is_a_usage_error(
    members: Members,
) -> None:
    """--pool shows the pool with its lanes and gates; --lane and --gate their row; --json the entry alone."""
    cli = members.cli
    with pointed_at(cli.endpoint_url):
        send_jobs(members.lanes["glue"]["queue_url"], [{"body": "{}", "group": "g"}])
    pool_entry = ok(cli.run("status", "--pool", "glue", "--json"))
    assert {key: pool_entry[key] for key in ("name", "max_concurrency", "running", "free", "paused")} == {
        "name": "glue",
        "max_concurrency": 4,
        "running": 0,
        "free": 4,
        "paused": False,
    }
    assert set(pool_entry) == {
        "name",
        "max_concurrency",
        "running",
        "free",
        "paused",
        "executions",
        "lanes",
        "gates",
    }
    assert [(each["name"], each["queued"]) for each in pool_entry["lanes"]] == [("glue", 1)]
    assert pool_entry["gates"] == []
    assert [each["name"] for each in ok(cli.run("status", "--pool", "default", "--json"))["gates"]] == [
        "crawl"
    ]
    lane = ok(cli.run("status", "--lane", "glue", "--json"))
    assert (lane["name"], lane["queued"], lane["max_concurrency"]) == ("glue", 1, 2)
    assert ok(cli.run("status", "--gate", "crawl", "--json"))["max_concurrency"] == 2
    pool = ok(cli.run("status", "--pool", "default")).splitlines()
    assert pool[0].split() == ["POOL", "MAX", "PAUSED", "RUNNING", "FREE"]
    assert [
        line.split()[0] for line in pool[1:] if line and line.split()[0] in {"default", "urgent", "glue"}
    ] == [
        "default",
        "default",
        "urgent",
    ]
    assert any(line.startswith("crawl") for line in pool)
    only_gate = ok(cli.run("status", "--gate", "crawl")).splitlines()
    assert [line.split()[0] for line in only_gate] == ["GATE", "crawl"]
    unknown = cli.run("status", "--lane", "nope")
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == "dispatcher: error: --lane nope: no such lane (lanes: default, urgent, glue)\n"
    both = cli.run("status", "--lane", "glue", "--gate", "crawl")
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr


def test_status_shows_stale_keys_and_forget_removes_one_but_never_a_configured_members(
    members: Members,
) -> None:
    """A key of a member gone from LANES: listed by status (text and JSON), removed by forget, once."""
    cli = members.cli
    members.control({"max_concurrency": 3, "lanes": {"gone": {"paused": True}, "urgent": {"paused": False}}})
    assert ok(cli.run("status", "--json"))["stale_keys"] == ["lanes.gone"]
    text = ok(cli.run("status"))
    assert "lanes.gone  remove it: dispatcher forget --lane gone" in text
    forgot = ok(cli.run("forget", "--lane", "gone"))
    assert forgot.startswith('forgot lanes.gone (it held {"paused": true}; parameter ')
    assert members.control() == {"max_concurrency": 3, "lanes": {"urgent": {"paused": False}}}
    assert "stale_keys" in ok(cli.run("status", "--json"))
    assert ok(cli.run("status", "--json"))["stale_keys"] == []
    again = ok(cli.run("forget", "--lane", "gone", "--json"))
    assert again["forgotten"] == {}
    assert ok(cli.run("forget", "--pool", "old")).startswith("nothing to forget: parameter ")
    configured = cli.run("forget", "--lane", "urgent")
    assert configured.returncode == 2
    assert "lane urgent is configured, so lanes.urgent is not stale" in configured.stderr
    assert members.control()["lanes"] == {"urgent": {"paused": False}}
    assert cli.run("forget").returncode == 2, "one of --pool, --lane, --gate is required"


def test_a_lane_removed_from_lanes_is_shown_with_what_waits_on_its_queue_until_forgotten(
    members: Members,
) -> None:
    """A tick keeps every member's queues; once lane glue is gone, status counts its jobs; forget drops it."""
    cli, glue = members.cli, members.lanes["glue"]
    members.tick()
    with pointed_at(cli.endpoint_url):
        send_jobs(glue["queue_url"], [{"body": "{}", "group": "g"}, {"body": "{}", "group": "h"}])
        dead_letter(glue["dead_letter_queue_url"], "{}", "left", "not JSON")
    members.document = json.dumps(
        {
            "pools": {"glue": {"max_concurrency": 4}},
            "lanes": [members.lanes["urgent"]],
            "gates": [members.gate],
        }
    )
    members.tick()
    env = cli.environment(**cli.stack.environment(3, lanes=members.document))
    status = ok(cli.run("status", "--json", stack=False, env=env))
    assert status["removed"] == [
        {
            "member": "lanes.glue",
            "queue_url": glue["queue_url"],
            "dead_letter_queue_url": glue["dead_letter_queue_url"],
            "queued": 2,
            "dead_letters": 1,
        }
    ]
    text = ok(cli.run("status", stack=False, env=env))
    assert "NO LONGER IN LANES" in text
    assert ["lanes.glue", "2", "1", glue["queue_url"]] in [line.split() for line in text.splitlines()]
    forgot = ok(cli.run("forget", "--lane", "glue", stack=False, env=env))
    assert forgot == f"forgot lanes.glue's queues (status no longer counts them): {glue['queue_url']}\n"
    members.tick()
    assert ok(cli.run("status", "--json", stack=False, env=env))["removed"] == []
    again = ok(cli.run("forget", "--lane", "glue", stack=False, env=env))
    assert again.startswith("nothing to forget: parameter ")


# -- info ---------------------------------------------------------------------------


def test_info_prints_every_url_a_producer_or_a_gated_workflow_needs(members: Members) -> None:
    """Each lane's queue and DLQ, each gate's request queue and DLQ, the release queue: text and JSON."""
    cli = members.cli
    document = ok(cli.run("info", "--json"))
    assert [(lane["name"], lane["queue_url"]) for lane in document["lanes"]] == [
        ("default", cli.stack.queue_url),
        ("urgent", members.lanes["urgent"]["queue_url"]),
        ("glue", members.lanes["glue"]["queue_url"]),
    ]
    assert document["lanes"][2]["dead_letter_queue_url"] == members.lanes["glue"]["dead_letter_queue_url"]
    assert document["gates"] == [
        {
            "name": "crawl",
            "pool": "default",
            "queue_url": members.gate["queue_url"],
            "dead_letter_queue_url": members.gate["dead_letter_queue_url"],
            "state_machine_arn": members.gate["state_machine_arn"],
            "release_queue_url": members.release_queue_url,
            "settings": {},
        }
    ]
    text = ok(cli.run("info"))
    assert "SETTING OF" not in text
    for url in (
        members.lanes["urgent"]["queue_url"],
        members.lanes["glue"]["dead_letter_queue_url"],
        members.gate["queue_url"],
        members.release_queue_url,
    ):
        assert url in text
    assert (
        "A gated workflow sends its requests to its gate's QUEUE and its releases to ReleaseQueueUrl" in text
    )


# -- dead letters -------------------------------------------------------------------


def test_dead_letters_and_their_redrive_act_on_the_named_lanes_or_gates_queues_only(
    members: Members,
) -> None:
    """--lane and --gate list and move that member's DLQ, back to its own queue; default: lane default."""
    cli, urgent, gate = members.cli, members.lanes["urgent"], members.gate
    with pointed_at(cli.endpoint_url):
        dead_letter(urgent["dead_letter_queue_url"], '{"n": 1}', "u-1", "name collision")
        dead_letter(gate["dead_letter_queue_url"], '{"token": 1}', "r-1", "not a gate request")
    assert ok(cli.run("dead-letters", "--json"))["total"] == 0
    listed = ok(cli.run("dead-letters", "--lane", "urgent", "--json"))
    assert (listed["member"], listed["total"], listed["reasons"]) == ("lane urgent", 1, {"name collision": 1})
    assert "1 dead letter(s) of gate crawl" in ok(cli.run("dead-letters", "--gate", "crawl"))
    moved = ok(cli.run("redrive-dead-letters", "--lane", "urgent"))
    assert moved.endswith("moved 1 dead letter(s) to the queue of lane urgent\n")
    ok(cli.run("redrive-dead-letters", "--gate", "crawl"))
    with pointed_at(cli.endpoint_url):
        assert [message["Body"] for message in read_all(urgent["queue_url"])] == ['{"n": 1}']
        assert [message["Body"] for message in read_all(gate["queue_url"])] == ['{"token": 1}']
        assert read_all(cli.stack.queue_url) == []
        assert read_all(urgent["dead_letter_queue_url"]) == []
    unknown = cli.run("redrive-dead-letters", "--gate", "nope")
    assert (unknown.returncode, unknown.stderr) == (
        2,
        "dispatcher: error: --gate nope: no such gate (gates: crawl)\n",
    )


# -- failed and rerun ---------------------------------------------------------------


def fail(members: Members, names: list[str]) -> None:
    """Stop these RUNNING executions of the default state machine and spool their failures."""
    cli = members.cli
    sfn, sqs = boto3.client("stepfunctions", region_name=REGION), boto3.client("sqs", region_name=REGION)
    with pointed_at(cli.endpoint_url):
        for name in names:
            arn = f"{cli.stack.state_machine_arn.replace(':stateMachine:', ':execution:')}:{name}"
            sfn.stop_execution(executionArn=arn)
            event = event_from_description(sfn.describe_execution(executionArn=arn))
            sqs.send_message(QueueUrl=cli.stack.spool_queue_url, MessageBody=json.dumps(event))


def test_a_rerun_goes_back_to_the_lane_that_started_it_and_an_unknown_origin_waits_for_lane(
    members: Members,
) -> None:
    """Two lanes of one state machine: each failure back to its own lane; one with no record stays spooled."""
    cli, urgent = members.cli, members.lanes["urgent"]
    with pointed_at(cli.endpoint_url):
        send_jobs(cli.stack.queue_url, [{"body": '{"n": 1}', "group": "d", "name": "from-default"}])
        send_jobs(urgent["queue_url"], [{"body": '{"n": 2}', "group": "u", "name": "from-urgent"}])
        boto3.client("stepfunctions", region_name=REGION).start_execution(
            stateMachineArn=cli.stack.state_machine_arn, name="by-hand", input='{"n": 3}'
        )
    assert members.tick()["started"] == 2
    fail(members, ["from-default", "from-urgent", "by-hand"])
    listed = {failure["name"]: failure["lane"] for failure in ok(cli.run("failed", "--json"))["failures"]}
    assert listed == {"from-default": "default", "from-urgent": "urgent", "by-hand": None}
    text = ok(cli.run("failed"))
    assert "1 of them came from a lane that can't be known (LANE ?)" in text
    assert {
        failure["name"] for failure in ok(cli.run("failed", "--lane", "urgent", "--json"))["failures"]
    } == {
        "from-urgent",
        "by-hand",
    }
    rerun = ok(cli.run("rerun", "--restart", "--json"))
    assert sorted((job["name"], job["lane"]) for job in rerun["queued"]) == [
        ("from-default", "default"),
        ("from-urgent", "urgent"),
    ]
    [skipped] = rerun["skipped"]
    assert (skipped["name"], skipped["lane"]) == ("by-hand", None)
    assert "no record says which: re-run it with --lane NAME" in skipped["skipped"]
    with pointed_at(cli.endpoint_url):
        assert [message["Body"] for message in read_all(cli.stack.queue_url)] == ['{"n": 1}']
        assert [message["Body"] for message in read_all(urgent["queue_url"])] == ['{"n": 2}']
    assert [failure["name"] for failure in ok(cli.run("failed", "--json"))["failures"]] == ["by-hand"]
    chosen = ok(cli.run("rerun", "--restart", "--lane", "urgent"))
    assert "restart by-hand as by-hand-rerun-" in chosen
    assert "on lane urgent" in chosen
    with pointed_at(cli.endpoint_url):
        assert [message["Body"] for message in read_all(urgent["queue_url"])] == ['{"n": 3}']
    assert ok(cli.run("failed", "--json"))["failures"] == []
