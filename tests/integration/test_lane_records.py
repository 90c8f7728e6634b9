"""Every lane's records are in one partition: a batch's ends are one write, a tick's windows one read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.adapters.window_items import read_items
from dispatcher.core.errors import ConfigurationError
from dispatcher.local.events import event_from_description, sqs_event
from dispatcher.local.stack import create_lane
from tests.support.harness import lanes, running_of, send
from tests.support.moto_harness import Harness


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


def test_the_ends_of_every_state_machine_are_one_item_of_one_write(harness: Harness) -> None:
    """A batch's ends of two state machines: one item in the default lane's partition, each its machine."""
    glue = two_pools_full(harness)
    machines = [harness.stack.state_machine_arn, glue["state_machine_arn"]]
    event = end_one_of_each(harness, machines)
    writes: list[list[dict[str, Any]]] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        items = [
            request["PutRequest"]["Item"] for request in params["RequestItems"][harness.stack.state_table]
        ]
        if any("#ends#" in item["sk"]["S"] for item in items):
            writes.append(items)

    harness.on("provide-client-params.dynamodb.BatchWriteItem", note)
    assert harness.tick(event)["started"] == 2
    [[item]] = writes
    assert item["pk"]["S"] == f"recent-start#{harness.stack.state_machine_arn}"
    ended = read_items([item], harness.stack.state_machine_arn).ended
    assert sorted(end.state_machine_arn for end in ended) == sorted(machines)


def test_a_state_table_that_refuses_the_ends_stops_the_invocation_loudly(harness: Harness) -> None:
    """Access denied on one state machine's ends is a configuration error, raised after both writes settle."""
    glue = two_pools_full(harness)
    event = end_one_of_each(harness, [harness.stack.state_machine_arn, glue["state_machine_arn"]])
    harness.fail("dynamodb.BatchWriteItem", "AccessDeniedException", "not authorized to write", after=0)
    with pytest.raises(ConfigurationError, match="not authorized"):
        harness.tick(event)
    assert harness.queue_counts() == (3, 0)
    assert harness.queue_counts(glue["queue_url"]) == (3, 0)


def test_a_tick_reads_every_state_machines_window_in_one_query(harness: Harness) -> None:
    """A cold tick over two pools reads the records once: the default lane's partition holds both."""
    glue = two_pools_full(harness)
    partitions: list[str] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        key = params["ExpressionAttributeValues"][":pk"]["S"]
        if key.startswith("recent-start#"):
            partitions.append(key)

    harness.on("provide-client-params.dynamodb.Query", note)
    assert harness.tick()["started"] == 0, "both pools are full, each counted from its own records"
    assert partitions == [f"recent-start#{harness.stack.state_machine_arn}"]
    assert running_of(harness, glue["state_machine_arn"]) == 2


def test_two_lanes_of_one_state_machine_admitting_one_name_in_a_round_start_it_once(
    harness: Harness,
) -> None:
    """One execution name from two lanes of one state machine: recorded and started once; the other waits.

    The second lane's message is released, and the next tick's start of it is the same execution
    (`StartExecution` of a running name with the same input is idempotent).
    """
    other = create_lane(harness.stack.name, "other", state_machine_arn=harness.stack.state_machine_arn)
    lanes(harness, 4, {"lanes": [other]})
    for url in (harness.stack.queue_url, other["queue_url"]):
        harness.sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps({"job": "same"}),
            MessageGroupId="g",
            MessageDeduplicationId="same",
            MessageAttributes={"ExecutionName": {"DataType": "String", "StringValue": "same"}},
        )
    first = harness.tick()
    assert first["started"] == 1
    assert first["released"] == 1
    second = harness.tick()
    assert second["started"] + second["already_started"] == 1
    assert harness.queue_counts() == (0, 0)
    assert harness.queue_counts(other["queue_url"]) == (0, 0)
    assert running_of(harness, harness.stack.state_machine_arn) == 1


def test_a_start_records_the_lane_it_came_from_for_its_re_run(harness: Harness) -> None:
    """Two lanes start one state machine: each start's record names its lane (and group) for `rerun`."""
    urgent = create_lane(harness.stack.name, "urgent", state_machine_arn=harness.stack.state_machine_arn)
    lanes(harness, 4, {"lanes": [urgent]})
    send(harness.stack.queue_url, ["d-0", "d-1"])
    send(urgent["queue_url"], ["u-0"], group="urgent-group")
    assert harness.tick()["started"] == 3
    table = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    executions = harness.sfn.list_executions(stateMachineArn=harness.stack.state_machine_arn)["executions"]
    started = {execution["name"]: execution["startDate"].timestamp() for execution in executions}
    origins = table.origins(started)
    assert sorted((origin.lane, origin.group) for origin in origins.values()) == [
        ("default", "d-0"),
        ("default", "d-1"),
        ("urgent", "urgent-group"),
    ]
