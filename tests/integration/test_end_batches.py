"""Batched end events: an SQS event source mapping's batch of status change events, one tick."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.adapters.window_items import read_items
from dispatcher.local.events import sqs_event
from tests.support.harness import still_listed
from tests.support.moto_harness import Harness


def full_then_two_end(harness: Harness) -> list[str]:
    """MAX 3 executions running, three jobs waiting; two executions end and the list still shows them."""
    harness.configure(3)
    for job in range(6):
        harness.send(json.dumps({"job": job}), group=f"g{job}", name=f"job-{job}")
    assert harness.tick()["started"] == 3
    ended = ["job-0", "job-1"]
    for name in ended:
        harness.sfn.stop_execution(executionArn=harness.arn_of(name))
    harness.on("after-call.states.ListExecutions", still_listed(harness, *ended))
    return ended


def batch(harness: Harness, ended: list[str], *others: object) -> dict[str, Any]:
    """The ends of ``ended`` and the ``others`` (any bodies), as the event source mapping delivers them."""
    bodies = [json.dumps(harness.status_change(name, "ABORTED")) for name in ended]
    bodies += [other if isinstance(other, str) else json.dumps(other) for other in others]
    return sqs_event(bodies)


def end_writes(harness: Harness) -> list[int]:
    """How many ends each `BatchWriteItem` of ends carried."""
    sizes: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        items = [
            request["PutRequest"]["Item"] for request in params["RequestItems"][harness.stack.state_table]
        ]
        ends = read_items(items).ended
        if ends:
            sizes.append(len(ends))

    harness.on("provide-client-params.dynamodb.BatchWriteItem", count)
    return sizes


def test_a_batch_frees_every_end_it_reports_and_skips_what_is_not_one(harness: Harness) -> None:
    """Two ends, a text, another machine's end and a RUNNING change: two slots freed, one tick, no failure."""
    ended = full_then_two_end(harness)
    writes = end_writes(harness)
    other_machine = harness.status_change("job-2", "SUCCEEDED")
    other_machine["detail"]["stateMachineArn"] += "-other"
    running = harness.status_change("job-2", "RUNNING", stopDate=None)
    result = harness.tick(batch(harness, ended, "not json", other_machine, running))
    assert (result["running"], result["started"], result["dead_lettered"]) == (1, 2, 0)
    assert harness.running() == 3
    assert writes == [2], "the batch's ends are written in one BatchWriteItem"
    table = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    assert sorted(end.name for end in table.window(time.time() - 60).ended) == ended


def test_a_batch_delivered_twice_frees_its_slots_once(harness: Harness) -> None:
    """The event source mapping may deliver a batch again: the second tick starts nothing."""
    ended = full_then_two_end(harness)
    event = batch(harness, ended)
    first, second = harness.tick(event), harness.tick(event)
    assert (first["started"], second["started"]) == (2, 0)
    assert (second["running"], harness.running()) == (3, 3)


def test_a_batch_that_reports_no_end_is_an_ordinary_tick(harness: Harness) -> None:
    """Nothing but records that aren't ends: the lagging list keeps both slots taken, nothing fails."""
    full_then_two_end(harness)
    writes = end_writes(harness)
    result = harness.tick(batch(harness, [], "{}", "[]", "not json"))
    assert (result["running"], result["started"], result["dead_lettered"]) == (3, 0, 0)
    assert writes == []


def test_a_late_batch_for_an_execution_redriven_since_keeps_it_counted(harness: Harness) -> None:
    """The batch's stop is older than the redrive the list shows: the execution counts."""
    ended = full_then_two_end(harness)
    event = batch(harness, ended[:1])
    stopped = json.loads(event["Records"][0]["body"])["detail"]["stopDate"] / 1000
    harness.clear_hooks()
    redriven = datetime.fromtimestamp(stopped + 5, tz=UTC)
    harness.on("after-call.states.ListExecutions", still_listed(harness, *ended, redriven_at=redriven))
    result = harness.tick(event)
    assert (result["running"], result["started"]) == (3, 0)


def test_a_batch_of_wakes_is_one_tick_that_starts_what_is_queued_and_skips_nothing(
    harness: Harness, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Producers' wakes on the end-event queue free nothing, are not skipped records, and are counted."""
    harness.configure(3)
    for job in range(2):
        harness.send(json.dumps({"job": job}), group=f"g{job}", name=f"job-{job}")
    with caplog.at_level(logging.INFO, logger="dispatcher"):
        result = harness.tick(sqs_event([json.dumps({"wake": True}), json.dumps({"wake": "default"})]))
    assert (result["running"], result["started"]) == (0, 2)
    assert harness.running() == 2
    messages = [record.getMessage() for record in caplog.records]
    assert not [message for message in messages if message.startswith("skipped")]
    [woken] = [record for record in caplog.records if record.getMessage().startswith("woken")]
    assert (woken.wakes, woken.members) == (2, ["default"])  # type: ignore[attr-defined]
    [document] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    figures = (document["Wakes"], document["EndEvents"], document["SkippedEventRecords"])
    assert figures == ([2.0], [0.0], [0.0])


def spared_job_after_the_first_empty_receive(harness: Harness) -> list[str]:
    """A producer's job queued (its wake spared) just after the tick's first receive found the queue empty."""
    sent: list[str] = []

    def send_once(parsed: dict[str, Any], **_: Any) -> None:
        if not sent and not parsed.get("Messages"):
            sent.append(harness.send('{"spared": true}', group="late", name="spared"))

    harness.on("after-call.sqs.ReceiveMessage", send_once)
    return sent


def test_a_tick_a_wake_brought_still_receives_what_its_producer_queued_within_the_wake_s_second(
    harness: Harness,
) -> None:
    """The producer sent no wake for a job queued within a second of its last one: this tick starts it.

    The first tick drains the queue before the wake's second has passed; the invocation
    ticks once more when it has, and receives the job the spared wake was for.
    """
    harness.configure(3)
    sent = spared_job_after_the_first_empty_receive(harness)
    result = harness.tick(sqs_event([json.dumps({"wake": True})], sent_at=time.time()))
    assert sent, "the job was queued after a receive found the queue empty"
    assert (result["started"], result["ticks"]) == (1, 2)
    assert harness.running() == 1


def test_a_wake_whose_second_has_passed_is_one_tick(harness: Harness) -> None:
    """An old wake (its producer would have woken again for anything later): no second tick."""
    harness.configure(3)
    sent = spared_job_after_the_first_empty_receive(harness)
    result = harness.tick(sqs_event([json.dumps({"wake": True})], sent_at=time.time() - 5))
    assert sent
    assert (result["started"], result["ticks"]) == (0, 1), "the job waits for the next trigger"


def test_a_wake_invoking_the_function_directly_is_one_tick(harness: Harness) -> None:
    """``{"wake": true}`` as the event itself (no SQS record, no SentTimestamp): one tick, as any object."""
    harness.configure(3)
    sent = spared_job_after_the_first_empty_receive(harness)
    result = harness.tick({"wake": True})
    assert sent
    assert (result["started"], result["ticks"]) == (0, 1)
