"""A job's size, pure: reading ``Slots``, what is too large, admission in slots, which entries go."""

from __future__ import annotations

import pytest

from dispatcher.cli.enqueue import jobs_from_lines, slots_count
from dispatcher.core.admission import DeadLetter, Start, admit, plan_message
from dispatcher.core.allocation import Allocation, Claim, Reserve
from dispatcher.core.messages import SLOTS_ATTRIBUTE, Job, QueuedMessage, parse_slots
from dispatcher.core.sizes import (
    Reservation,
    SizeEntry,
    reservation_after,
    size_key,
    sizes_of,
    stale_keys,
    stale_packs,
    too_large,
    weight,
)

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:glue-runs"


def _message(name: str, slots: str | None = None, group: str | None = None) -> QueuedMessage:
    attributes = {"ExecutionName": {"DataType": "String", "StringValue": name}}
    if slots is not None:
        attributes[SLOTS_ATTRIBUTE] = {"DataType": "Number", "StringValue": slots}
    return QueuedMessage(
        message_id=f"id-{name}",
        receipt_handle=f"rh-{name}",
        body="{}",
        group_id=group or name,
        execution_name=name,
        execution_name_type="String",
        attributes=attributes,
    )


def test_slots_are_read_as_a_whole_number_of_at_least_one() -> None:
    """String or Number, whole, at least 1; anything else names ``Slots``."""
    assert parse_slots(None) == 1
    assert parse_slots({"DataType": "String", "StringValue": " 40 "}) == 40
    assert parse_slots({"DataType": "Number.dpu", "StringValue": "2"}) == 2
    for text in ("0", "-3", "2.0", "two", "²", ""):
        with pytest.raises(ValueError, match="Slots must be an integer >= 1"):
            parse_slots({"DataType": "String", "StringValue": text})
    with pytest.raises(ValueError, match="of type String or Number, not Binary"):
        parse_slots({"DataType": "Binary", "BinaryValue": "AA=="})


def test_a_malformed_slots_plans_poison_naming_slots() -> None:
    """A bad size is poison with a reason; a good one rides on the start."""
    planned = plan_message(_message("a", "nine"))
    assert isinstance(planned, DeadLetter)
    assert planned.reason.startswith("invalid Slots:")
    sized = plan_message(_message("b", "9"))
    assert isinstance(sized, Start)
    assert sized.slots == 9


def test_too_large_names_the_first_limit_the_job_exceeds_and_a_pause_is_no_size() -> None:
    """The reason names the size and the limit; MAX 0 is a pause, never too small."""
    limits = [(6, "pool glue"), (3, "lane A"), (None, "max_per_group")]
    assert too_large(8, limits) == "too large: 8 slots, pool glue allows 6"
    assert too_large(4, limits) == "too large: 4 slots, lane A allows 3"
    assert too_large(3, limits) is None
    assert too_large(50, [(0, "pool glue")]) is None


def test_admission_spends_slots_and_a_job_larger_than_what_is_left_waits_with_its_group() -> None:
    """6 free: 4 starts, 3 is short (its group's later job waits behind it), 1 starts, 2 is short."""
    messages = [
        _message("big", "4", "g1"),
        _message("mid", "3", "g2"),
        _message("after-mid", "1", "g2"),
        _message("one", None, "g3"),
        _message("two", "2", "g4"),
    ]
    admission = admit(messages, 6)
    assert [start.name for start in admission.starts] == ["big", "one"]
    assert [start.name for start in admission.short] == ["mid", "two"]
    assert [message.message_id for message in admission.waiting] == ["id-mid", "id-after-mid", "id-two"]


def test_weights_and_the_entries_that_may_go() -> None:
    """An ended, old entry goes; a running or young one stays; a count stopped at MAX removes none."""
    entries = {
        size_key(ARN, "running"): SizeEntry(5, 100.0),
        size_key(ARN, "ended"): SizeEntry(3, 100.0),
        size_key(ARN, "young"): SizeEntry(2, 900.0),
        "other-machine:x": SizeEntry(4, 100.0),
    }
    sizes = sizes_of(entries, ARN)
    assert sizes == {"running": 5, "ended": 3, "young": 2}
    assert weight(sizes, ["running", "plain"]) == 6
    assert stale_keys(entries, {ARN: frozenset({"running"})}, 500.0) == [size_key(ARN, "ended")]
    assert stale_keys(entries, {ARN: None}, 500.0) == []


def test_a_pack_goes_whole_once_every_entry_of_it_is_stale_and_not_before() -> None:
    """Pack p1's two entries ended: it goes; p2 has one still running: it stays; one not yet written: none."""
    entries = {
        "m:a": SizeEntry(5, 1.0, "p1"),
        "m:b": SizeEntry(3, 1.0, "p1"),
        "m:c": SizeEntry(2, 1.0, "p2"),
        "m:d": SizeEntry(4, 1.0, "p2"),
        "m:e": SizeEntry(2, 1.0),
    }
    assert stale_packs(entries, {"m:a", "m:b", "m:c", "m:e"}) == ["p1"]
    assert stale_packs(entries, {"m:a"}) == []
    assert SizeEntry(5, 1.0, "p1") == SizeEntry(5, 1.0), "where it is kept is not part of an entry's value"


def test_the_cli_reads_a_size_from_its_option_and_from_a_lines_slots_field() -> None:
    """``--slots`` and a line's ``slots`` are checked as the dispatcher checks ``Slots``."""
    assert slots_count("40") == 40
    for text in ("0", "x", "1.5"):
        with pytest.raises(Exception, match="must be an integer >= 1"):
            slots_count(text)
    found = jobs_from_lines(
        iter(['{"input": {}, "group": "g", "slots": 12}', '{"input": {}, "group": "g", "slots": 0}']),
        "jobs.jsonl",
        None,
    )
    assert [job.slots for job in found.jobs] == [12]
    assert found.problems == ['jobs.jsonl:2: "slots": Slots must be an integer >= 1, not 0']
    assert Job("{}", "g", slots=3).attributes()[SLOTS_ATTRIBUTE] == {"DataType": "Number", "StringValue": "3"}


def test_a_reservation_keeps_the_pools_freed_slots_from_its_priority_and_lower_not_from_higher() -> None:
    """Higher priorities first; at and below the reserved lane's, nothing while less than its size is free."""
    claims = [Claim("urgent", 1), Claim("big", 0), Claim("small", 0), Claim("backfill", -1)]
    held = Allocation(3, claims, reserved=Reserve("big", 5))
    assert held.next_pass() == {"urgent": 3}
    held.took("urgent", 3, 0)  # its queue was empty
    assert held.next_pass() == {}
    assert not held.reserve_offered
    fits = Allocation(9, claims[1:], reserved=Reserve("big", 5))
    assert fits.next_pass() == {"big": 7, "small": 2}
    assert fits.reserve_offered
    fits.took("big", 7, 7)
    fits.took("small", 2, 2)
    assert fits.next_pass() == {}


def test_a_lane_short_of_its_own_room_waits_alone_and_a_large_job_above_l_goes_alone() -> None:
    """The lane's own MAX lacking: only it waits. Alone: the job's size, nothing beside it."""
    own = Allocation(6, [Claim("big", 0, room=2), Claim("small", 0)], reserved=Reserve("big", 4))
    assert own.next_pass() == {"small": 6}
    alone = Allocation(2, [Claim("big", 0), Claim("small", 0)], reserved=Reserve("big", 5, alone=True))
    assert alone.next_pass() == {"big": 5}
    alone.took("big", 5, 5)
    assert alone.next_pass() == {}


def test_one_reservation_a_pool_and_a_higher_priority_lane_takes_it_over() -> None:
    """The first short job is kept; an equal lane's waits behind it; a higher lane's replaces it."""
    kept = reservation_after(None, {"a": ("big", 5), "b": ("wide", 4)}, {"a": 0, "b": 0}, 10.0)
    assert kept == Reservation("a", "big", 5, 10.0)
    assert reservation_after(kept, {"b": ("wide", 4)}, {"a": 0, "b": 0}, 20.0) == kept
    assert reservation_after(kept, {"c": ("huge", 8)}, {"a": 0, "c": 1}, 30.0) == Reservation(
        "c", "huge", 8, 30.0
    )


def test_a_reserved_jobs_size_is_held_from_the_others_until_it_is_admitted() -> None:
    """Room 6, the reserved 4-slot job received after two small ones: they take only 2, then it goes."""
    messages = [_message("a", None), _message("b", None), _message("c", None), _message("big", "4")]
    admission = admit(messages, 6, hold=("big", 4))
    assert [start.name for start in admission.starts] == ["a", "b", "big"]
