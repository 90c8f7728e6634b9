"""Refill on completion: a status change event frees its slot at once, whatever the list still shows."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.core.events import EndedExecution
from tests.support.harness import still_listed
from tests.support.moto_harness import Harness


def full_then_one_ends(harness: Harness, max_concurrency: int = 2) -> str:
    """MAX executions running from the queue, two more jobs waiting; the first execution ends."""
    harness.configure(max_concurrency)
    for job in range(max_concurrency + 2):
        harness.send(json.dumps({"job": job}), group=f"g{job}", name=f"job-{job}")
    assert harness.tick()["started"] == max_concurrency
    harness.sfn.stop_execution(executionArn=harness.arn_of("job-0"))
    harness.on("after-call.states.ListExecutions", still_listed(harness, "job-0"))
    return "job-0"


def test_status_change_event_frees_the_slot_the_list_still_shows(harness: Harness) -> None:
    """The tick an end event triggers starts one job, although ListExecutions still lists the ended one."""
    ended = full_then_one_ends(harness)
    result = harness.tick(harness.status_change(ended, "ABORTED"))
    assert (result["running"], result["started"]) == (1, 1)
    assert harness.running() == 2


def test_without_the_event_the_lagging_list_keeps_the_slot_taken(harness: Harness) -> None:
    """The same tick on the schedule sees the ended execution listed and starts nothing."""
    full_then_one_ends(harness)
    result = harness.tick()
    assert (result["running"], result["started"]) == (2, 0)


@pytest.mark.parametrize(
    "change",
    [
        lambda event: {**event, "detail": {**event["detail"], "stateMachineArn": "arn:aws:states:x:1:y:z"}},
        lambda event: {**event, "detail": {**event["detail"], "status": "RUNNING", "stopDate": None}},
    ],
    ids=["another-state-machine", "running-status"],
)
def test_misdirected_status_change_never_exceeds_max(
    harness: Harness, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """An event for another machine or a RUNNING status is an ordinary tick; none exceeds MAX."""
    ended = full_then_one_ends(harness)
    event = change(harness.status_change(ended, "ABORTED"))
    result = harness.tick(event)
    assert (result["running"], result["started"]) == (2, 0)
    assert harness.running() == 1


def test_duplicated_status_change_frees_one_slot_only(harness: Harness) -> None:
    """The same end event delivered twice frees its slot once: the second tick starts nothing."""
    ended = full_then_one_ends(harness)
    event = harness.status_change(ended, "ABORTED")
    first = harness.tick(event)
    second = harness.tick(event)
    assert (first["started"], second["started"]) == (1, 0)
    assert harness.running() == 2


def test_later_ticks_remember_an_end_while_the_list_lags(harness: Harness) -> None:
    """A scheduled tick after the event still leaves the ended execution out while the list shows it."""
    ended = full_then_one_ends(harness, max_concurrency=3)
    harness.sfn.stop_execution(executionArn=harness.arn_of("job-1"))
    harness.on("after-call.states.ListExecutions", still_listed(harness, "job-1"))
    harness.tick(harness.status_change(ended, "ABORTED"))
    # job-1's event is lost; job-0's is remembered: only job-0's slot is free again.
    result = harness.tick()
    assert result["running"] == 3


def test_late_event_for_an_execution_redriven_since_keeps_it_counted(harness: Harness) -> None:
    """An execution the list shows redriven after the event's stop is running again: it counts."""
    ended = full_then_one_ends(harness)
    event = harness.status_change(ended, "FAILED")
    stopped = event["detail"]["stopDate"] / 1000
    harness.clear_hooks()
    redriven = datetime.fromtimestamp(stopped + 5, tz=UTC)
    harness.on("after-call.states.ListExecutions", still_listed(harness, ended, redriven_at=redriven))
    result = harness.tick(event)
    assert (result["running"], result["started"]) == (2, 0)


def test_event_tick_records_the_end_in_the_state_table(harness: Harness) -> None:
    """The end is written to the state table with the event's stop time, for the next ticks."""
    ended = full_then_one_ends(harness)
    event = harness.status_change(ended, "ABORTED")
    harness.tick(event)
    table = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    assert table.window(time.time() - 60).ended == (
        EndedExecution(
            name=ended,
            stopped_at=event["detail"]["stopDate"] / 1000,
            state_machine_arn=harness.stack.state_machine_arn,
        ),
    )


def list_calls(harness: Harness) -> list[str]:
    """A list that gets an entry per `ListExecutions` call."""
    calls: list[str] = []
    harness.on("before-call.states.ListExecutions", lambda **_: calls.append("list"))
    return calls


def test_warm_ticks_within_a_second_share_one_list_read(harness: Harness) -> None:
    """A burst of ticks in one warm container reads ListExecutions once; the starts between still count."""
    harness.configure(1, list_reuse_seconds=10)
    calls = list_calls(harness)
    for job in range(5):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    results = [harness.tick(cold=index == 0) for index in range(3)]
    assert [result["started"] for result in results] == [1, 0, 0]
    assert [result["running"] for result in results] == [0, 1, 1]
    assert len(calls) == 1


def test_cold_ticks_each_read_the_list(harness: Harness) -> None:
    """Each cold start reads ListExecutions: nothing is reused across containers."""
    calls = list_calls(harness)
    harness.tick()
    harness.tick()
    assert len(calls) == 2


def test_list_reuse_can_be_switched_off(harness: Harness) -> None:
    """LIST_REUSE_SECONDS=0 reads the list on every tick, warm or not."""
    harness.configure(2, list_reuse_seconds=0)
    calls = list_calls(harness)
    harness.tick()
    harness.tick(cold=False)
    assert len(calls) == 2


def test_event_ticks_in_a_burst_refill_every_slot_with_one_list_read(harness: Harness) -> None:
    """Three ends in quick succession, three warm event ticks: three refills and a single list read."""
    harness.configure(3, list_reuse_seconds=10)
    for job in range(6):
        harness.send(json.dumps({"job": job}), group=f"g{job}", name=f"job-{job}")
    assert harness.tick()["started"] == 3
    ended = ["job-0", "job-1", "job-2"]
    events = []
    for name in ended:
        harness.sfn.stop_execution(executionArn=harness.arn_of(name))
        events.append(harness.status_change(name, "SUCCEEDED"))
    harness.on("after-call.states.ListExecutions", still_listed(harness, *ended))
    calls = list_calls(harness)
    results = [harness.tick(event, cold=index == 0) for index, event in enumerate(events)]
    assert [result["started"] for result in results] == [1, 1, 1]
    assert harness.running() == 3
    assert len(calls) == 1
