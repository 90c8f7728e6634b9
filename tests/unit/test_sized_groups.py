"""A job's size among message groups: a group's limit and fair share in slots, held jobs, the books."""

from __future__ import annotations

from collections import Counter

from dispatcher.core.admission import HoldForGroup, Start
from dispatcher.core.messages import SLOTS_ATTRIBUTE, QueuedMessage, size_of
from dispatcher.core.rosters import RosterEntry, group_counts
from dispatcher.core.tenants import Hold, Share, admit_shared, due_to_show, group_full
from dispatcher.core.topology import DEFAULT, Lane
from dispatcher.tick.groups import GroupBook

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:glue-runs"


def _message(name: str, group: str, slots: int | None = None) -> QueuedMessage:
    attributes = {"ExecutionName": {"DataType": "String", "StringValue": name}}
    if slots is not None:
        attributes[SLOTS_ATTRIBUTE] = {"DataType": "Number", "StringValue": str(slots)}
    return QueuedMessage(
        message_id=f"id-{name}",
        receipt_handle=f"rh-{name}",
        body="{}",
        group_id=group,
        execution_name=name,
        execution_name_type="String",
        attributes=attributes,
    )


def _started(admission: object) -> list[str]:
    return [start.name for start in admission.starts]  # type: ignore[attr-defined]


def test_a_groups_limit_is_in_slots_and_a_job_short_of_its_groups_room_is_held_for_it() -> None:
    """Group g holds 3 of its 5: a job of 3 is held (its later job waits behind it); h's job of 2 starts."""
    share = Share(max_per_group=5)
    messages = [_message("g-big", "g", 3), _message("g-small", "g"), _message("h-two", "h", 2)]
    admission = admit_shared(messages, 20, share, Counter({"g": 3}))
    assert _started(admission) == ["h-two"]
    held = [wait for wait in admission.waits if isinstance(wait, HoldForGroup)]
    assert [wait.message.message_id for wait in held] == ["id-g-big"]
    assert [message.message_id for message in admission.waiting] == ["id-g-big", "id-g-small"]

    fits = admit_shared(messages, 20, share, Counter({"g": 2}))
    assert _started(fits) == ["g-big", "h-two"], "2 + 3 is the limit: it fits; then g is full for g-small"


def test_fair_share_orders_groups_by_the_slots_they_hold_not_their_executions() -> None:
    """Group a runs one execution of 6 slots, b three of 1: b holds fewer slots, so its job goes first."""
    share = Share(fair_share=True)
    messages = [_message("a-next", "a"), _message("b-next", "b")]
    admission = admit_shared(messages, 1, share, Counter({"a": 6, "b": 3}))
    assert _started(admission) == ["b-next"]


def test_a_rates_tokens_count_starts_not_the_slots_they_take() -> None:
    """Two tokens: two jobs of 3 slots start in a group-counting lane, the third waits."""
    messages = [_message(f"j{index}", f"g{index}", 3) for index in range(3)]
    admission = admit_shared(messages, 20, Share(max_per_group=3), Counter(), max_starts=2)
    assert _started(admission) == ["j0", "j1"]
    assert all(isinstance(start, Start) and start.slots == 3 for start in admission.starts)


def test_a_held_job_is_shown_again_only_once_its_group_has_room_for_its_size() -> None:
    """Held with 3 slots under a limit of 5: not at 3 held, yes at 2 (and a job of 1 at 4)."""
    share = Share(max_per_group=5)
    big = Hold("g", "id-big", "rh", 0.0, "big", slots=3)
    small = Hold("h", "id-small", "rh", 0.0, "small")
    assert due_to_show([big, small], {"g": 3, "h": 4}, share) == [small]
    assert due_to_show([big, small], {"g": 2, "h": 5}, share) == [big]
    assert not group_full(share, 2, 3)
    assert group_full(share, 5), "at its limit, with the default size of 1"


def test_a_rosters_group_counts_are_the_sum_of_its_entries_sizes() -> None:
    """Two entries of group g (4 and 1 slots) and one without a group: g holds 5."""
    entries = [
        RosterEntry(member="default", name="a", recorded_at=1.0, state_machine_arn=ARN, group="g", slots=4),
        RosterEntry(member="default", name="b", recorded_at=1.0, state_machine_arn=ARN, group="g"),
        RosterEntry(member="default", name="c", recorded_at=1.0, state_machine_arn=ARN, slots=9),
    ]
    assert group_counts(entries) == Counter({"g": 5})


def test_a_received_jobs_size_is_its_slots_and_one_when_absent_or_malformed() -> None:
    """A malformed size is poison elsewhere: here it weighs 1, as the job without one."""
    assert size_of(_message("a", "g", 7)) == 7
    assert size_of(_message("b", "g")) == 1
    malformed = _message("c", "g").model_copy(
        update={"attributes": {SLOTS_ATTRIBUTE: {"DataType": "String", "StringValue": "many"}}}
    )
    assert size_of(malformed) == 1


def test_a_lanes_book_weighs_a_jobs_slots_and_a_gates_book_counts_each_request_once() -> None:
    """A lane's group at 2 of 5 holds a job of 4 back and counts a started job of 3 as 3; a gate counts 1."""
    lane = Lane(DEFAULT, DEFAULT, "jobs.fifo", "dead-letters.fifo", ARN)
    share = Share(max_per_group=5)
    lanes = GroupBook(lane, share, Counter({"g": 2}), sized=True)
    gates = GroupBook(lane, share, Counter({"g": 2}))
    four = _message("four", "g", 4)
    assert lanes.at_limit_of([four]) == [four]
    assert gates.at_limit_of([four]) == []
    lanes.started([_message("three", "g", 3)])
    gates.started([_message("three", "g", 3)])
    assert (lanes.running["g"], gates.running["g"]) == (5, 3)
