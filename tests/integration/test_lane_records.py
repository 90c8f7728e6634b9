"""Each lane's state machine has its own records: ends written, windows read, all state machines at once."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from dispatcher.core.errors import ConfigurationError
from dispatcher.local.events import event_from_description, sqs_event
from dispatcher.local.stack import create_lane
from tests.integration.conftest import Harness
from tests.integration.test_lanes import lanes, running_of, send


def two_pools_full(harness: Harness) -> dict[str, Any]:
    """Pool default (MAX 2) and pool glue (MAX 2, lane glue) full, three jobs waiting in each."""
    glue = create_lane(harness.stack.name, "glue", pool="glue")
    lanes(harness, 2, {"pools": {"glue": {"max_concurrency": 2}}, "lanes": [glue]})
    send(harness.stack.queue_url, [f"a-{index}" for index in range(5)])
    send(glue["queue_url"], [f"g-{index}" for index in range(5)])
    assert harness.tick()["started"] == 4
    return glue


def end_one_of_each(harness: Harness, machines: list[str]) -> dict[str, Any]:
    """Stop one RUNNING execution of each state machine; the batch of their status change events."""
    bodies = []
    for arn in machines:
        execution = harness.sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"][0]
        harness.sfn.stop_execution(executionArn=execution["executionArn"])
        description = harness.sfn.describe_execution(executionArn=execution["executionArn"])
        bodies.append(json.dumps(event_from_description(description)))
    return sqs_event(bodies)


def test_a_batch_with_ends_of_two_lanes_frees_a_slot_in_each_pool(harness: Harness) -> None:
    """One end of each state machine in one batch: each pool gets its slot back, and only its own."""
    glue = two_pools_full(harness)
    machines = [harness.stack.state_machine_arn, glue["state_machine_arn"]]
    result = harness.tick(end_one_of_each(harness, machines))
    assert (result["started"], result["pools"]["default"]["free"], result["pools"]["glue"]["free"]) == (
        2,
        1,
        1,
    )
    assert [running_of(harness, arn) for arn in machines] == [2, 2]


def test_the_ends_of_each_state_machine_are_written_at_once(harness: Harness) -> None:
    """Each state machine's ends are one write to its own partition; the writes are in flight together.

    Each write waits, before it is sent, for the other one to be sent too: written one after
    the other, the first would wait in vain.
    """
    glue = two_pools_full(harness)
    machines = [harness.stack.state_machine_arn, glue["state_machine_arn"]]
    event = end_one_of_each(harness, machines)
    together = threading.Barrier(2, timeout=20)
    partitions: list[str] = []

    def meet(params: dict[str, Any], **_: Any) -> None:
        items = [
            request["PutRequest"]["Item"] for request in params["RequestItems"][harness.stack.state_table]
        ]
        if any("#ends#" in item["sk"]["S"] for item in items):
            partitions.extend(item["pk"]["S"] for item in items)
            together.wait()

    harness.on("provide-client-params.dynamodb.BatchWriteItem", meet)
    assert harness.tick(event)["started"] == 2
    assert sorted(partitions) == sorted(f"recent-start#{arn}" for arn in machines)


def test_a_state_table_that_refuses_the_ends_stops_the_invocation_loudly(harness: Harness) -> None:
    """Access denied on one state machine's ends is a configuration error, raised after both writes settle."""
    glue = two_pools_full(harness)
    event = end_one_of_each(harness, [harness.stack.state_machine_arn, glue["state_machine_arn"]])
    harness.fail("dynamodb.BatchWriteItem", "AccessDeniedException", "not authorized to write", after=0)
    with pytest.raises(ConfigurationError, match="not authorized"):
        harness.tick(event)
    assert harness.queue_counts() == (3, 0)
    assert harness.queue_counts(glue["queue_url"]) == (3, 0)


def test_a_tick_reads_each_state_machines_window_at_once(harness: Harness) -> None:
    """A cold tick reads each state machine's window of records (a Query each), in flight together."""
    glue = two_pools_full(harness)
    together = threading.Barrier(2, timeout=20)
    partitions: list[str] = []

    def meet(params: dict[str, Any], **_: Any) -> None:
        key = params["ExpressionAttributeValues"][":pk"]["S"]
        if key.startswith("recent-start#"):
            partitions.append(key)
            together.wait()

    harness.on("provide-client-params.dynamodb.Query", meet)
    assert harness.tick()["started"] == 0
    machines = [harness.stack.state_machine_arn, glue["state_machine_arn"]]
    assert sorted(partitions) == sorted(f"recent-start#{arn}" for arn in machines)
