"""Admission rounds: batched records, concurrent starts per group, batched deletes, and their stops."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

import boto3
import pytest

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.adapters.window_items import read_items
from dispatcher.core.errors import ConfigurationError
from dispatcher.local.account import REGION
from tests.support.harness import throttle_every_start
from tests.support.moto_harness import Harness


def count_calls(harness: Harness) -> Counter[str]:
    """Every AWS call the harness makes, counted by operation."""
    calls: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    harness.on("before-call", note)
    return calls


def test_round_records_starts_in_batches_of_25_before_starting_them(harness: Harness) -> None:
    """Every StartExecution names a start an earlier BatchWriteItem wrote, ≤ 25 starts an item."""
    harness.configure(60)
    order: list[tuple[str, frozenset[str]]] = []
    lock = threading.Lock()

    def note_records(params: dict[str, Any], **_: Any) -> None:
        [requests] = params["RequestItems"].values()
        items = [request["PutRequest"]["Item"] for request in requests]
        assert all(len(item["names"]["L"]) <= 25 for item in items if "names" in item)
        names = frozenset(record.name for record in read_items(items).starts)
        with lock:
            order.append(("record", names))

    def note_start(params: dict[str, Any], **_: Any) -> None:
        with lock:
            order.append(("start", frozenset({params["name"]})))

    harness.on("provide-client-params.dynamodb.BatchWriteItem", note_records)
    harness.on("provide-client-params.states.StartExecution", note_start)
    for job in range(60):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    assert harness.tick()["started"] == 60
    recorded: set[str] = set()
    for kind, names in order:
        if kind == "record":
            recorded |= names
        else:
            assert names <= recorded
    assert len(recorded) == 60


def test_round_batches_receives_records_and_deletes(harness: Harness) -> None:
    """60 jobs at MAX 60: 6 receives, one record write (3 items), 60 starts, 6 deletes, a count, the lease.

    The first tick of a stack also keeps the members' queues (a PutItem beside the lease's).
    """
    harness.configure(60)
    for job in range(60):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    calls = count_calls(harness)
    harness.tick()
    assert dict(calls) == {
        "DescribeStateMachine": 1,
        "Query": 1,
        "ListExecutions": 1,
        "ReceiveMessage": 6,
        "BatchWriteItem": 1,
        "StartExecution": 60,
        "DeleteMessageBatch": 6,
        "PutItem": 2,
        "DeleteItem": 1,
        "GetParameter": 1,
    }
    calls.clear()
    harness.send(json.dumps({"job": 60}), group="g60")
    harness.tick()
    assert calls["PutItem"] == 1, "the members' queues are kept already: only the lease's PutItem"


def test_round_starts_groups_concurrently_within_the_bound(harness: Harness) -> None:
    """Starts of different groups overlap, never more than START_CONCURRENCY at once."""
    harness.configure(40, start_concurrency=4)
    in_flight = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def enter(**_: Any) -> None:
        with lock:
            in_flight["now"] += 1
            in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
        time.sleep(0.02)

    def leave(**_: Any) -> None:
        with lock:
            in_flight["now"] -= 1

    harness.on("before-call.states.StartExecution", enter)
    harness.on("after-call.states.StartExecution", leave)
    for job in range(40):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    assert harness.tick()["started"] == 40
    assert in_flight["peak"] == 4


def test_round_keeps_send_order_within_each_group(harness: Harness) -> None:
    """With many groups started at once, each group's executions start in send order."""
    harness.configure(50)
    groups: dict[str, list[int]] = {}
    for job in range(50):
        group = f"g{job % 7}"
        groups.setdefault(group, []).append(job)
        harness.send(json.dumps({"job": job}), group=group)
    for _ in range(10):
        harness.tick()
        if harness.queue_counts() == (0, 0):
            break
    assert harness.started_by_group(lambda job: f"g{job % 7}") == groups


def test_round_one_busy_group_is_not_mistaken_for_a_drained_queue(harness: Harness) -> None:
    """A group in flight makes a later receive of the round empty: the next round carries on."""
    harness.configure(25)
    for job in range(25):
        harness.send(json.dumps({"job": job}), group="only")
    result = harness.tick()
    assert result["started"] == 25
    assert result["stopped"] == "capacity"
    assert harness.started_jobs() == list(range(25))


def test_round_throttled_receive_mid_round_starts_what_it_holds(harness: Harness) -> None:
    """A receive still throttled after retries, mid-round, ends the tick after starting what arrived."""
    harness.configure(30)
    for job in range(30):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    harness.fail("sqs.ReceiveMessage", "ThrottlingException", after=1)
    result = harness.tick()
    assert (result["started"], result["stopped"]) == (10, "throttled")
    assert harness.queue_counts() == (20, 0)


def test_round_throttled_start_stops_every_group_and_frees_unattempted_records(harness: Harness) -> None:
    """After a throttled start no group starts more; records of starts never attempted are deleted."""
    harness.configure(20, start_concurrency=1)
    for job in range(20):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    harness.fail("states.StartExecution", "ThrottlingException", "Rate exceeded", after=5)
    result = harness.tick()
    assert (result["started"], result["released"], result["stopped"]) == (5, 15, "throttled")
    assert harness.queue_counts() == (15, 0)
    table = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    kept = {record.name for record in table.window(time.time() - 60).starts}
    started = {execution["name"] for execution in harness.executions()}
    assert len(kept) == 6  # the five started and the one whose start was throttled (it may exist)
    assert started < kept


def test_round_every_start_throttled_tries_at_most_one_receive_batch(harness: Harness) -> None:
    """Every StartExecution throttled after retries, 30 jobs in 30 groups: at most 10 tried, all released."""
    harness.configure(30)  # start threads sized from the quota: more than one receive batch
    for job in range(30):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    counts = throttle_every_start(harness)
    result = harness.tick()
    assert (result["started"], result["released"], result["stopped"]) == (0, 30, "throttled")
    assert counts["most"] <= 10
    assert 1 <= counts["tried"] <= 10
    assert harness.queue_counts() == (30, 0)


def test_round_starts_beyond_the_first_receive_batch_run_once_starts_succeed(harness: Harness) -> None:
    """Once the first ten starts came back, the rest of a 30-group round runs more than ten at once."""
    harness.configure(30)
    for job in range(30):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    lock = threading.Lock()
    counts = {"in_flight": 0, "done": 0}
    eleven = threading.Event()

    def enter(**_: Any) -> None:
        with lock:
            counts["in_flight"] += 1
            if counts["in_flight"] > 10:
                eleven.set()
            hold = counts["done"] >= 10
        if hold:
            # Hold each later start until eleven are in flight together (a tick that never
            # runs more than ten at once fails here, after the timeout, not by hanging).
            eleven.wait(timeout=30)

    def leave(**_: Any) -> None:
        with lock:
            counts["in_flight"] -= 1
            counts["done"] += 1

    harness.on("before-call.states.StartExecution", enter)
    harness.on("after-call.states.StartExecution", leave)
    assert harness.tick()["started"] == 30
    assert eleven.is_set(), "never more than ten starts in flight at once"


def test_round_unprocessed_record_is_not_started_and_its_group_waits(harness: Harness) -> None:
    """Starts DynamoDB left unprocessed don't happen; the rest of their group is held back too."""
    harness.configure(30)  # two items of starts (25 and 5): one left unprocessed, one written
    names = [harness.send(json.dumps({"job": job}), group="a" if job < 3 else f"g{job}") for job in range(30)]
    left: set[str] = set()

    # The record calls of a round run in parallel: each call's own context carries its answer.
    def leave_first_unprocessed(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        [requests] = params["RequestItems"].values()
        for request in requests:
            item = request["PutRequest"]["Item"]
            if names[0] in {record.name for record in read_items([item]).starts}:
                context["unprocessed"] = [request]
                left.update(record.name for record in read_items([item]).starts)

    def answer(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        parsed["UnprocessedItems"] = {harness.stack.state_table: context.get("unprocessed", [])}

    harness.on("provide-client-params.dynamodb.BatchWriteItem", leave_first_unprocessed)
    harness.on("after-call.dynamodb.BatchWriteItem", answer)
    result = harness.tick()
    assert result["stopped"] == "throttled"
    started = {execution["name"] for execution in harness.executions()}
    assert started == set(names) - left - set(names[:3])
    assert started, "the other item's starts happen"
    assert harness.queue_counts() == (30 - len(started), 0)


def test_round_state_table_still_throttled_starts_nothing(harness: Harness) -> None:
    """Recording still throttled after retries: nothing of the round starts and everything is released."""
    for job in range(3):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    harness.fail("dynamodb.BatchWriteItem", "ProvisionedThroughputExceededException")
    result = harness.tick()
    assert (result["started"], result["released"], result["stopped"]) == (0, 3, "throttled")
    assert harness.executions() == []
    assert harness.queue_counts() == (3, 0)


def test_invocation_is_one_tick_by_default(harness: Harness) -> None:
    """Without LOOP_SECONDS an invocation runs one tick, however many jobs wait."""
    harness.configure(1)
    for job in range(3):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    result = harness.tick()
    assert (result["ticks"], result["started"], result["stopped"]) == (1, 1, "capacity")


def test_round_forbidden_receive_mid_round_releases_what_it_holds(harness: Harness) -> None:
    """A later receive of a round denied: the error names it and the first receive's messages are released."""
    harness.configure(30)
    for job in range(30):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    harness.fail("sqs.ReceiveMessage", "AccessDenied", "not authorized", status=403, after=1)
    with pytest.raises(ConfigurationError, match="ReceiveMessage failed with AccessDenied"):
        harness.tick()
    assert harness.executions() == []
    assert harness.queue_counts() == (30, 0)


def test_emulator_hands_each_message_to_one_of_many_parallel_receives(harness: Harness) -> None:
    """As in SQS, receives at once never get the same message (moto's own backend would, unlocked)."""
    for job in range(200):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    got: list[str] = []

    def receive() -> None:
        sqs = boto3.client("sqs", region_name=REGION)
        for _ in range(5):
            messages = sqs.receive_message(QueueUrl=harness.stack.queue_url, MaxNumberOfMessages=10)
            got.extend(message["MessageId"] for message in messages.get("Messages", []))

    threads = [threading.Thread(target=receive) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == len(set(got)) == 200
