"""A job's size through the real handler, the producer client and boto3 against moto.

The pool's RUNNING is the sum of its executions' sizes: the dispatcher keeps each sized
execution's size in the state table from just before its start until it is known to have
ended, so a cold start long after the start records left the window still weighs it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from freezegun import freeze_time

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.core.messages import DISPATCH_ERROR_ATTRIBUTE, SLOTS_ATTRIBUTE
from dispatcher.core.sizes import Reservation, SizeEntry
from dispatcher.producer import JobRejectedError, Producer
from tests.support.clock import advance
from tests.support.harness import lanes
from tests.support.moto_harness import Harness


def _started(harness: Harness) -> set[str]:
    return {execution["name"] for execution in harness.executions("RUNNING")}


def _sizes(harness: Harness) -> dict[str, int]:
    """Execution key → slots, as the state table keeps them for pool ``default``."""
    ledger = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    return {key: entry.slots for key, entry in ledger.sizes().get("default", {}).items()}


def _send_sized(harness: Harness, name: str, slots: Any, data_type: str = "Number") -> None:
    harness.sqs.send_message(
        QueueUrl=harness.stack.queue_url,
        MessageBody="{}",
        MessageGroupId=name,
        MessageDeduplicationId=name,
        MessageAttributes={
            "ExecutionName": {"DataType": "String", "StringValue": name},
            SLOTS_ATTRIBUTE: {"DataType": data_type, "StringValue": str(slots)},
        },
    )


def test_a_pool_counts_its_executions_sizes_and_a_job_too_large_for_what_is_free_waits(
    harness: Harness,
) -> None:
    """MAX 6: sizes 4, 3, 1, 1 in four groups start 4 + 1 + 1; the 3 waits, then starts once 4 end."""
    harness.configure(6)
    producer = Producer(harness.stack.queue_url)
    for name, slots in (("big", 4), ("mid", 3), ("one", 1), ("two", None)):
        producer.send({"job": name}, group=name, name=name, slots=slots)
    result = harness.tick()
    assert (result["running"], result["started"]) == (0, 3)
    assert _started(harness) == {"big", "one", "two"}
    assert harness.queue_counts() == (1, 0)
    assert _sizes(harness) == {f"{harness.stack.state_machine_arn.rpartition(':')[2]}:big": 4}
    again = harness.tick()
    assert (again["running"], again["started"]) == (6, 0)
    harness.sfn.stop_execution(executionArn=harness.arn_of("big"))
    assert harness.tick()["started"] == 1
    assert _started(harness) == {"mid", "one", "two"}
    # `job` says each started job's size, as recorded when it started; a queued one has none to say.
    sizes = {name: producer.job(name).as_json().get("slots") for name in ("big", "mid", "one", "two")}
    assert sizes == {"big": 4, "mid": 3, "one": 1, "two": 1}
    assert "slots" not in producer.job("never-sent").as_json()


def test_a_sized_execution_weighs_its_size_long_after_its_start_record_left_the_window(
    harness: Harness,
) -> None:
    """A cold start 10 minutes on, with only the list and the pool's item to go by, counts 5 slots."""
    harness.configure(6)
    with freeze_time(datetime.now(UTC), tick=True) as frozen:
        Producer(harness.stack.queue_url).send({}, group="g", name="wide", slots=5)
        assert harness.tick()["started"] == 1
        advance(frozen, 600)
        for name in ("a", "b"):
            harness.send(group=name, name=name)
        result = harness.tick(cold=True)
        assert (result["running"], result["started"]) == (5, 1)
        assert harness.queue_counts() == (1, 0)


def test_an_ended_sized_execution_leaves_the_pools_item_with_a_later_sized_start(harness: Harness) -> None:
    """The pack of executions known to have ended goes with the next write, not one more call."""
    harness.configure(10)
    producer = Producer(harness.stack.queue_url)
    machine = harness.stack.state_machine_arn.rpartition(":")[2]
    with freeze_time(datetime.now(UTC), tick=True) as frozen:
        producer.send({}, group="g", name="first", slots=3)
        harness.tick()
        assert harness.finish_running() == 1
        advance(frozen, 400)
        producer.send({}, group="g", name="second", slots=2)
        assert harness.tick()["started"] == 1
        assert _sizes(harness) == {f"{machine}:second": 2}


def test_a_rounds_sized_starts_are_one_small_pack_and_a_pack_goes_whole_in_a_later_write(
    harness: Harness,
) -> None:
    """Two rounds, two packs (read back as one pool's entries); a third write deletes the first pack."""
    ledger = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    ledger.record_sizes("default", {"m:a": SizeEntry(3, 1.0), "m:b": SizeEntry(2, 1.0)}, ())
    ledger.record_sizes("default", {"m:c": SizeEntry(4, 2.0)}, ())
    ledger.record_reservation("default", Reservation("default", "big", 9, 2.0))
    kept, reservations = ledger.slot_items()
    entries = kept["default"]
    assert {key: entry.slots for key, entry in entries.items()} == {"m:a": 3, "m:b": 2, "m:c": 4}
    assert entries["m:a"].pack == entries["m:b"].pack != entries["m:c"].pack
    assert all(entry.pack.startswith("~slots#default#") for entry in entries.values())
    assert reservations["default"].name == "big"

    ledger.record_sizes("default", {"m:d": SizeEntry(5, 3.0)}, [entries["m:a"].pack])
    assert sorted(ledger.sizes()["default"]) == ["m:c", "m:d"]
    assert ledger.slot_items()[1]["default"].name == "big", "the reservation's item is not a pack"


def test_a_malformed_slots_is_poison_and_a_job_larger_than_its_pool_is_dead_lettered_too_large(
    harness: Harness,
) -> None:
    """``Slots`` 0, "two" or 1.5 names ``Slots``; 8 slots in a pool of MAX 6 says so, and what fits starts."""
    harness.configure(6)
    for name, slots in (("zero", 0), ("word", "two"), ("half", "1.5")):
        _send_sized(harness, name, slots, "String")
    _send_sized(harness, "huge", 8)
    _send_sized(harness, "fits", 6)
    result = harness.tick()
    assert (result["started"], result["dead_lettered"]) == (1, 4)
    assert _started(harness) == {"fits"}
    reasons = {
        letter["MessageAttributes"]["ExecutionName"]["StringValue"]: letter["MessageAttributes"][
            DISPATCH_ERROR_ATTRIBUTE
        ]["StringValue"]
        for letter in harness.dead_letters()
    }
    assert reasons["huge"] == "too large: 8 slots, pool default allows 6"
    for name in ("zero", "word", "half"):
        assert reasons[name].startswith("invalid Slots: Slots must be an integer >= 1")


def test_a_job_larger_than_its_lanes_max_per_group_names_that_limit(harness: Harness) -> None:
    """``max_per_group`` can't grow for a job: the reason names it and its limit; a job within it starts."""
    harness.configure(10, max_per_group=2)
    _send_sized(harness, "three", 3)
    _send_sized(harness, "two", 2)
    assert harness.tick()["dead_lettered"] == 1
    [letter] = harness.dead_letters()
    assert letter["MessageAttributes"][DISPATCH_ERROR_ATTRIBUTE]["StringValue"] == (
        "too large: 3 slots, max_per_group allows 2"
    )


def test_the_producer_refuses_a_size_that_is_not_an_integer_of_at_least_one(harness: Harness) -> None:
    """Checked before sending, as the dispatcher would: nothing reaches the queue."""
    harness.configure(6)
    producer = Producer(harness.stack.queue_url)
    for slots in (0, -1, True, 2.5):
        with pytest.raises(JobRejectedError, match="Slots must be an integer >= 1"):
            producer.send({}, group="g", slots=slots)  # type: ignore[arg-type]
    assert harness.queue_counts() == (0, 0)


def _reservation(harness: Harness) -> Any:
    ledger = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    return ledger.window(0.0).reservations.get("default")


def _reserved_slots(out: str) -> list[list[float]]:
    """The ``ReservedSlots`` figures of pool default in the EMF documents printed."""
    return [
        document["ReservedSlots"]
        for document in (json.loads(line) for line in out.splitlines() if '"_aws"' in line)
        if "ReservedSlots" in document and document.get("Pool") == "default"
    ]


def test_a_large_job_that_found_too_few_slots_keeps_the_freed_ones_until_it_fits(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    """MAX 4 full, a 3-slot job queued before small ones: freed slots are kept for it until 3 are free.

    No small job starts meanwhile; then it starts, the reservation goes, and the small ones
    take what frees next.
    """
    harness.configure(4)
    producer = Producer(harness.stack.queue_url)
    for index in range(4):
        producer.send({}, group=f"s{index}", name=f"s{index}")
    assert harness.tick()["started"] == 4
    producer.send({}, group="big", name="big", slots=3)
    for index in range(6):
        producer.send({}, group=f"x{index}", name=f"x{index}")
    capsys.readouterr()
    reports = []
    for name in ("s0", "s1"):
        harness.sfn.stop_execution(executionArn=harness.arn_of(name))
        held = harness.tick()  # 1, then 2 free, small jobs visible: kept for the large one
        assert held["started"] == 0, held
        assert _reservation(harness).name == "big"
        reports.append(held)
    # With 2 of the 3 free, the lane is offered nothing: it receives nothing, none put back.
    assert (reports[1]["released"], reports[1]["stopped"]) == (0, "capacity"), reports[1]
    # The first of them found it short (its reservation written after); the second kept 2 for it.
    assert _reserved_slots(capsys.readouterr().out) == [[2.0]]
    harness.sfn.stop_execution(executionArn=harness.arn_of("s2"))
    fits = harness.tick()
    assert (fits["running"], fits["started"]) == (1, 1)
    assert _started(harness) == {"big", "s3"}
    assert _reservation(harness) is None
    harness.sfn.stop_execution(executionArn=harness.arn_of("s3"))
    assert harness.tick()["started"] == 1
    assert _started(harness) == {"big", "x0"}


def test_a_job_larger_than_an_adaptive_limit_starts_alone_once_its_pool_runs_nothing(
    harness: Harness,
) -> None:
    """MAX 10, L 2: a 5-slot job waits while a small job runs, then starts alone above L."""
    lanes(harness, 10, {"pools": {"default": {"adaptive": {"errors": ["Glue.X"], "initial": 2}}}})
    producer = Producer(harness.stack.queue_url)
    producer.send({}, group="a", name="small", slots=1)
    assert harness.tick()["started"] == 1
    producer.send({}, group="b", name="wide", slots=5)
    producer.send({}, group="c", name="other", slots=1)
    held = harness.tick()  # L 2, 1 running: the 5-slot job is short, and keeps the pool's slot
    assert held["started"] == 0
    assert _reservation(harness).name == "wide"
    harness.sfn.stop_execution(executionArn=harness.arn_of("small"))
    alone = harness.tick()
    assert (alone["running"], alone["started"]) == (0, 1)
    assert _started(harness) == {"wide"}
    assert harness.tick()["running"] == 5
