"""`dispatcher status --groups`: per member and group, RUNNING as the tick counts it, and held jobs."""

from __future__ import annotations

import json
import uuid

import boto3

from dispatcher.local.account import REGION, pointed_at
from dispatcher.local.stack import send_jobs
from tests.support.cli_runner import Cli


def limit_groups(cli: Cli, limit: int, max_concurrency: int | None = None) -> None:
    """Sets the default lane's ``max_per_group`` in the control parameter (and MAX, when given)."""
    control: dict[str, object] = {"lanes": {"default": {"max_per_group": limit}}}
    if max_concurrency is not None:
        control["max_concurrency"] = max_concurrency
    with pointed_at(cli.endpoint_url):
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name=cli.stack.control_parameter,
            Value=json.dumps(control),
            Type="String",
            Overwrite=True,
        )


def send(cli: Cli, group: str, count: int) -> None:
    """Queues ``count`` jobs in message group ``group``."""
    with pointed_at(cli.endpoint_url):
        send_jobs(
            cli.stack.queue_url, [{"body": json.dumps({"job": uuid.uuid4().hex}), "group": group}] * count
        )


def test_status_groups_shows_running_and_held_per_group_most_running_first(cli: Cli) -> None:
    """`status --groups` shows RUNNING and held jobs per group, most RUNNING first."""
    limit_groups(cli, 2)
    send(cli, "noisy", 4)
    send(cli, "quiet", 1)
    report = cli.tick_in_process()
    assert report["started"] == 3
    assert report["tenants"]["held"] == 1

    result = cli.run("status", "--groups", "--json")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "groups": [
            {"member": "default", "group": "noisy", "running": 2, "held": 1, "executions": 2},
            {"member": "default", "group": "quiet", "running": 1, "held": 0, "executions": 1},
        ]
    }
    text = cli.run("status", "--groups").stdout.splitlines()
    assert text[0].split() == ["MEMBER", "GROUP", "RUNNING", "HELD"]
    assert text[1].split() == ["default", "noisy", "2", "1"]
    top = json.loads(cli.run("status", "--groups", "--top", "1", "--lane", "default", "--json").stdout)
    assert [row["group"] for row in top["groups"]] == ["noisy"]


def test_a_groups_running_is_in_slots_and_its_job_waits_until_the_group_has_room_for_its_size(
    cli: Cli,
) -> None:
    """A group limit of 5 slots: jobs of 3 and 2 start, the next of 3 is held until 3 are free.

    `status --groups` shows the group's 5 slots of 2 executions; the held job is not
    shown again (nor started) while the group's room is short of its size.
    """
    limit_groups(cli, 5, max_concurrency=20)
    for size in (3, 2, 3):
        sent = cli.run("enqueue", '{"job": 1}', "--group", "heavy", "--slots", str(size))
        assert sent.returncode == 0, sent.stderr
    report = cli.tick_in_process()
    assert (report["started"], report["tenants"]["held"]) == (2, 1)

    rows = json.loads(cli.run("status", "--groups", "--json").stdout)["groups"]
    assert rows == [{"member": "default", "group": "heavy", "running": 5, "held": 1, "executions": 2}]
    text = cli.run("status", "--groups").stdout.splitlines()
    assert text[1].split() == ["default", "heavy", "5", "(2", "executions)", "1"]

    again = cli.tick_in_process()
    assert (again["started"], again["tenants"]["held"]) == (0, 1), "5 of 5 held: no room for 3 yet"


def test_status_groups_with_no_member_counting_by_group_says_so(cli: Cli) -> None:
    """`status --groups` with no member counting by group says so."""
    result = cli.run("status", "--groups")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no message group holds a place")
    assert json.loads(cli.run("status", "--groups", "--json").stdout) == {"groups": []}


def test_top_is_a_usage_error_without_groups_or_below_one(cli: Cli) -> None:
    """`--top` is a usage error without `--groups`, or below one."""
    for arguments in (["status", "--top", "3"], ["status", "--groups", "--top", "0"]):
        result = cli.run(*arguments)
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
