"""The cap holds although ListExecutions lags, and freed capacity comes back by itself."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from freezegun import freeze_time

from dispatcher.adapters.ledger import StartLedgerTable
from tests.support.clock import advance
from tests.support.moto_harness import Harness
from tests.support.records import starts_at


def hide_all_executions(parsed: dict[str, Any], **_: Any) -> None:
    """ListExecutions lag: the list omits every execution (AWS may, for up to 60 s)."""
    parsed["executions"] = []
    parsed.pop("nextToken", None)


def test_tick_counts_recorded_starts_the_list_does_not_show(harness: Harness) -> None:
    """Starts the list omits still count, so a second tick (a cold start) starts nothing over MAX."""
    harness.configure(3)
    harness.on("after-call.states.ListExecutions", hide_all_executions)
    for job in range(6):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    first = harness.tick()
    second = harness.tick()
    assert first["started"] == 3
    assert second["running"] == 3
    assert second["started"] == 0
    assert harness.running() == 3


def test_tick_reuses_a_slot_as_soon_as_an_unlisted_start_ends(harness: Harness) -> None:
    """An execution that ends before the list shows it frees its slot on the next tick."""
    harness.configure(2)
    harness.on("after-call.states.ListExecutions", hide_all_executions)
    for job in range(4):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    assert harness.tick()["started"] == 2
    harness.finish_running()
    result = harness.tick()
    assert result["running"] == 0
    assert result["started"] == 2


def test_tick_counts_a_listed_recorded_start_once_and_keeps_its_record(harness: Harness) -> None:
    """A listed recorded start counts once; its record stays, as a later list may omit it again."""
    harness.configure(2)
    harness.send("{}", group="a")
    harness.send("{}", group="b")
    harness.configure(1)
    harness.tick()
    harness.configure(2)
    listed = harness.tick()
    harness.on("after-call.states.ListExecutions", hide_all_executions)
    omitted = harness.tick()
    assert (listed["running"], listed["started"]) == (1, 1)
    assert (omitted["running"], omitted["started"]) == (2, 0)
    ledger = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    assert len(ledger.window(time.time() - 600).starts) == 2


def test_tick_forgets_a_recorded_start_once_it_ended(harness: Harness) -> None:
    """A recorded start that DescribeExecution shows ended is deleted from the state table."""
    harness.on("after-call.states.ListExecutions", hide_all_executions)
    harness.send("{}")
    harness.tick()
    harness.finish_running()
    assert harness.tick()["running"] == 0
    ledger = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    assert ledger.window(time.time() - 600).starts == ()


def test_tick_start_recorded_by_a_dead_process_holds_a_slot_for_90_seconds(harness: Harness) -> None:
    """A start recorded before a crash (no execution) holds capacity for at most 90 s."""
    harness.configure(1)
    ledger = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    harness.send("{}")
    with freeze_time("2026-11-21 12:00:00", tick=True) as frozen:
        ledger.record(starts_at(ledger, {"crashed-before-start": "group"}, time.time()))
        advance(frozen, 60)
        held = harness.tick()
        advance(frozen, 31)
        freed = harness.tick()
    assert (held["running"], held["started"]) == (1, 0)
    assert (freed["running"], freed["started"]) == (0, 1)


def test_tick_throttled_start_releases_the_rest_and_returns_normally(harness: Harness) -> None:
    """StartExecution still throttled after retries stops admitting; unstarted messages are released."""
    harness.fail("states.StartExecution", "ThrottlingException", "Rate exceeded", after=1)
    for job in range(4):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    result = harness.tick()
    assert result["stopped"] == "throttled"
    assert result["started"] == 1
    assert result["released"] == 3
    assert harness.queue_counts() == (3, 0)
    assert harness.dead_letters() == []


@pytest.mark.parametrize(
    "call", ["states.DescribeStateMachine", "states.ListExecutions", "sqs.ReceiveMessage"]
)
def test_tick_throttled_before_admitting_starts_nothing(harness: Harness, call: str) -> None:
    """Throttled before admitting, the tick returns normally (no configuration error) and holds nothing."""
    harness.fail(call, "ThrottlingException")
    harness.send("{}")
    result = harness.tick()
    assert result["stopped"] == "throttled"
    assert harness.executions() == []
    assert harness.queue_counts() == (1, 0)


def test_tick_failed_delete_is_redelivered_and_not_started_twice(harness: Harness) -> None:
    """A started message whose delete fails comes back and is recognised as already started."""
    message_id = harness.send('{"job": 1}')
    entries: list[dict[str, Any]] = []

    def note_entries(params: dict[str, Any], **_: Any) -> None:
        entries[:] = params["Entries"]

    def fail_every_entry(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        failed = [{"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"} for entry in entries]
        return AWSResponse("", 200, {}, None), {"Successful": [], "Failed": failed}

    harness.on("provide-client-params.sqs.DeleteMessageBatch", note_entries)
    harness.on("before-call.sqs.DeleteMessageBatch", fail_every_entry)
    first = harness.tick()
    assert first["delete_failures"] == 1
    assert harness.queue_counts() == (0, 1)
    harness.clear_hooks()
    harness.redeliver([entry["ReceiptHandle"] for entry in entries])
    second = harness.tick()
    assert second["already_started"] + second["started"] == 1
    assert [execution["name"] for execution in harness.executions()] == [message_id]
    assert harness.queue_counts() == (0, 0)


def test_tick_checks_unlisted_starts_only_until_max_is_reached(harness: Harness) -> None:
    """Counting stops describing recorded starts once MAX is reached (cost grows with MAX)."""
    harness.configure(2)
    harness.on("after-call.states.ListExecutions", hide_all_executions)
    for job in range(2):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    harness.tick()
    ledger = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    ledger.record(starts_at(ledger, {"a-third-recorded-start": "group"}, time.time()))
    described: list[str] = []
    harness.on("provide-client-params.states.DescribeExecution", lambda params, **_: described.append("x"))
    result = harness.tick()
    assert result["running"] == 2
    assert len(described) == 2
