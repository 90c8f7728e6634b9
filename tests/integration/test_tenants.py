"""Tenants through the real handler and boto3 against moto: a group's limit, held jobs, fair share."""

from __future__ import annotations

import json
import time
from typing import Any

from dispatcher.adapters.lane_roster import LaneRosterTable
from dispatcher.adapters.lane_roster_items import ENTRIES_KIND
from dispatcher.adapters.roster_items import inside_partition
from dispatcher.core.tenants import HOLD_SECONDS, held_key
from dispatcher.core.topology import DEFAULT, Lane
from dispatcher.producer import Producer
from tests.support.moto_harness import Harness


def send_jobs(harness: Harness, group: str, count: int, prefix: str | None = None) -> list[str]:
    """``count`` jobs of ``group``, each named ``<prefix>-<i>`` in its body."""
    jobs = [f"{prefix or group}-{index}" for index in range(count)]
    for job in jobs:
        harness.send(json.dumps({"job": job}), group=group)
    return jobs


def group_of(job: str) -> str:
    """The message group a job's name says (``group-n`` → ``group``)."""
    return job.rsplit("-", 1)[0]


def roster_items(harness: Harness, member: str = "default") -> list[dict[str, Any]]:
    """The items of ``member``'s roster partition."""
    partition = inside_partition(harness.stack.state_machine_arn, member)
    response = harness.dynamodb.query(
        TableName=harness.stack.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": partition}},
        ConsistentRead=True,
    )
    return list(response["Items"])


def roster_names(harness: Harness) -> list[str]:
    """The executions lane default's roster holds places for, as `status --groups` reads them."""
    lane = Lane(DEFAULT, DEFAULT, harness.stack.queue_url, "d.fifo", harness.stack.state_machine_arn)
    rosters = LaneRosterTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    return sorted(entry.name for entry in rosters.read(lane).entries)


def end(harness: Harness, job: str) -> dict[str, Any]:
    """Stop the execution of ``job`` and return its status change event."""
    execution = next(
        execution
        for execution in harness.executions("RUNNING")
        if json.loads(harness.input_of(execution["name"]))["job"] == job
    )
    harness.sfn.stop_execution(executionArn=execution["executionArn"])
    return harness.status_change(execution["name"], "ABORTED")


def test_a_group_at_its_limit_waits_while_the_others_start_and_its_held_job_is_received_once(
    harness: Harness,
) -> None:
    """A group at its limit waits while the others start, and its held job is received once."""
    harness.configure(10, max_per_group=2)
    noisy = send_jobs(harness, "noisy", 5)
    quiet = send_jobs(harness, "quiet", 2)

    first = harness.tick()

    assert harness.started_by_group(group_of) == {"noisy": noisy[:2], "quiet": quiet}
    assert first["tenants"]["held"] == 1
    assert first["tenants"]["groups_at_limit"] == 2
    # The held job's item names it: the group's third job, in flight for the hold.
    [held] = [item for item in roster_items(harness) if item["sk"]["S"] == held_key("noisy")]
    assert harness.queue_counts()[1] == 1
    for _ in range(4):
        assert harness.tick()["started"] == 0
    assert len(harness.starts.calls) == 4
    # Held in flight, it was received once in five ticks (SQS counts each receive: this one is the second).
    harness.sqs.change_message_visibility(
        QueueUrl=harness.stack.queue_url, ReceiptHandle=held["receipt_handle"]["S"], VisibilityTimeout=0
    )
    [message] = harness.sqs.receive_message(
        QueueUrl=harness.stack.queue_url, MessageSystemAttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    assert json.loads(message["Body"])["job"] == noisy[2]
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"
    harness.redeliver([message["ReceiptHandle"]])


def test_a_held_job_starts_in_the_tick_its_groups_end_frees_a_place_in_send_order(harness: Harness) -> None:
    """A held job starts in the tick its group's end frees a place, in send order."""
    harness.configure(10, max_per_group=1)
    noisy = send_jobs(harness, "noisy", 3)
    harness.tick()
    assert harness.started_jobs() == noisy[:1]
    hold_items = [item for item in roster_items(harness) if item["kind"]["S"] == "held"]
    assert len(hold_items) == 1

    report = harness.tick(end(harness, noisy[0]))

    assert harness.started_jobs() == noisy[:2]
    assert report["started"] == 1
    # Still at its limit: the group's third job is held in turn.
    assert report["tenants"]["held"] == 1
    harness.tick(end(harness, noisy[1]))
    assert harness.started_jobs() == noisy
    assert harness.queue_counts() == (0, 0)
    assert [item for item in roster_items(harness) if item["kind"]["S"] == "held"] == []


def test_without_an_end_event_a_groups_place_comes_back_in_the_tick_that_counts_its_end(
    harness: Harness,
) -> None:
    """No end event: the tick that finds an execution ended frees its group's place with its pool slot."""
    harness.configure(10, max_per_group=2)
    noisy = send_jobs(harness, "noisy", 3)
    harness.tick()
    assert harness.started_jobs() == noisy[:2]
    end(harness, noisy[0])  # it ends, and no status change event reaches the dispatcher

    report = harness.tick()

    assert report["running"] == 1, "the pool counts it ended (DescribeExecution: the list no longer shows it)"
    assert harness.started_jobs() == noisy, "its group's place came back in the same tick"
    running = sorted(execution["name"] for execution in harness.executions("RUNNING"))
    assert roster_names(harness) == running, (
        "the roster (what status --groups reads) agrees with Step Functions"
    )


def test_an_execution_running_for_days_still_counts_in_its_group(harness: Harness) -> None:
    """An execution running for days still counts in its group."""
    harness.configure(10, max_per_group=1)
    send_jobs(harness, "noisy", 2)
    harness.tick()
    # As if the execution had started three days ago: every window the dispatcher keeps is long past.
    for item in roster_items(harness):
        if item["kind"]["S"] == ENTRIES_KIND:
            item["recorded_at"] = {"N": str(time.time() - 3 * 86400)}
            harness.dynamodb.put_item(TableName=harness.stack.state_table, Item=item)
    assert harness.tick()["started"] == 0
    assert harness.running() == 1


def test_the_hold_keeps_the_job_in_flight_for_four_hours_at_most() -> None:
    """The hold keeps the job in flight for four hours at most."""
    assert HOLD_SECONDS == 4 * 3600
    # 14 days of retention, one receive per hold: below the template's MaxReceiveCount of 100.
    assert 14 * 86400 // HOLD_SECONDS == 84


def test_with_fair_share_a_newcomer_takes_the_next_free_slot_ahead_of_a_backlog(harness: Harness) -> None:
    """With fair share a newcomer takes the next free slot ahead of a backlog."""
    harness.configure(3, fair_share=True)
    noisy = send_jobs(harness, "noisy", 12)
    harness.tick()
    assert harness.started_jobs() == noisy[:3]
    quiet = send_jobs(harness, "quiet", 1)

    harness.tick(end(harness, noisy[0]))

    assert harness.started_jobs() == [*noisy[:3], *quiet]
    harness.tick(end(harness, noisy[1]))
    # Alone, the noisy group takes every slot again, in order (work-conserving).
    assert harness.started_jobs() == [*noisy[:3], *quiet, noisy[3]]


def test_without_fair_share_the_backlog_keeps_the_free_slot(harness: Harness) -> None:
    """Without fair share the backlog keeps the free slot."""
    harness.configure(3)
    noisy = send_jobs(harness, "noisy", 12)
    harness.tick()
    send_jobs(harness, "quiet", 1)

    harness.tick(end(harness, noisy[0]))

    assert harness.started_jobs() == noisy[:4]


def test_a_group_limit_from_lanes_and_the_control_parameter(harness: Harness) -> None:
    """A group's limit comes from `LANES` and from the control parameter."""
    harness.configure(10)
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter,
        Value=json.dumps({"lanes": {"default": {"max_per_group": 1}}}),
        Type="String",
        Overwrite=True,
    )
    noisy = send_jobs(harness, "noisy", 3)
    report = harness.tick()
    assert harness.started_jobs() == noisy[:1]
    assert report["tenants"]["held"] == 1


def test_a_cancelled_head_of_a_group_at_its_limit_leaves_its_place_to_the_next_job_in_the_tick(
    harness: Harness,
) -> None:
    """One per group: the head is cancelled, so its group's next job starts in this tick, not a tick later."""
    harness.configure(10, max_per_group=1)
    jobs = [f"g-{index}" for index in range(3)]
    for job in jobs:
        harness.send(json.dumps({"job": job}), group="g", name=job)
    Producer(harness.stack.queue_url).cancel(jobs[0])

    report = harness.tick()

    assert (report["cancelled"], report["started"], report["tenants"]["held"]) == (1, 1, 1)
    assert harness.started_jobs() == jobs[1:2]
