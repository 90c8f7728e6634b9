"""The planning core: capacity, names, validation, ordering — no AWS, no clock."""

from __future__ import annotations

import json

import pytest

from dispatcher.models import ListedRunning, QueuedMessage, RecordedStart
from dispatcher.planning import (
    DEAD_LETTER_HEADROOM_BYTES,
    DISPATCH_ERROR_MAX_LENGTH,
    MAX_INPUT_BYTES,
    RECENT_START_WINDOW_SECONDS,
    SQS_MAX_MESSAGE_ATTRIBUTES,
    DeadLetter,
    GroupOrder,
    Start,
    dead_letter_attributes,
    describe_trigger,
    dispatch_error,
    free_slots,
    input_problem,
    listing_page_size,
    name_problem,
    plan_message,
    receive_size,
    review_recent_starts,
    still_counts,
)
from tests.inputs import json_of_size

NOW = 1_800_000_000.0


def message(
    body: str = "{}", *, message_id: str = "m-1", group: str = "g", **fields: object
) -> QueuedMessage:
    return QueuedMessage(message_id=message_id, receipt_handle="r", body=body, group_id=group, **fields)


def record(name: str, age: float) -> RecordedStart:
    return RecordedStart(name=name, recorded_at=NOW - age, sort_key=f"{NOW - age}#{name}")


@pytest.mark.parametrize(
    ("max_concurrency", "running", "expected"),
    [(5, 2, 3), (5, 5, 0), (5, 7, 0), (0, 0, 0), (1000, 1, 999)],
)
def test_free_slots_is_max_minus_running_never_negative(
    max_concurrency: int, running: int, expected: int
) -> None:
    """Free slots are MAX - N, and zero when N already reaches MAX."""
    assert free_slots(max_concurrency, running) == expected


@pytest.mark.parametrize(("free", "expected"), [(0, 0), (1, 1), (3, 3), (10, 10), (11, 10), (500, 10)])
def test_receive_size_is_free_capped_at_ten(free: int, expected: int) -> None:
    """One receive asks for no more than the free slots, and SQS's limit of 10."""
    assert receive_size(free) == expected


@pytest.mark.parametrize(
    ("max_concurrency", "counted", "expected"),
    [(5, 0, 5), (5, 4, 1), (5, 5, 1), (2500, 0, 1000), (2500, 2000, 500)],
)
def test_listing_page_size_stops_paging_at_max(max_concurrency: int, counted: int, expected: int) -> None:
    """A listing page asks only for what is left to reach MAX, at most 1000."""
    assert listing_page_size(max_concurrency, counted) == expected


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("{}", None),
        ('{"a": [1, 2, {"b": null}]}', None),
        ('"just a string"', None),
        ("42", None),
        ("not json", "not valid JSON"),
        ("", "not valid JSON"),
        ('{"a": NaN}', "not valid JSON"),
        ("{'single': 'quotes'}", "not valid JSON"),
        ("\ud800", "not valid UTF-8"),
    ],
)
def test_input_problem_accepts_only_json(body: str, problem: str | None) -> None:
    """The body must be valid JSON to be an execution input."""
    found = input_problem(body)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    ("size", "valid"), [(MAX_INPUT_BYTES - 1, True), (MAX_INPUT_BYTES, True), (MAX_INPUT_BYTES + 1, False)]
)
def test_input_problem_limit_is_262144_bytes_inclusive(size: int, valid: bool) -> None:
    """Exactly 262,144 bytes is valid; one more byte is too large."""
    body = json_of_size(size)
    assert len(body.encode()) == size
    assert (input_problem(body) is None) is valid


def test_input_problem_counts_utf8_bytes_not_characters() -> None:
    """The limit is in UTF-8 bytes: multi-byte characters count more than once."""
    body = json.dumps({"x": "é" * (MAX_INPUT_BYTES // 2)}, ensure_ascii=False)
    assert len(body) < MAX_INPUT_BYTES
    problem = input_problem(body)
    assert problem is not None
    assert "bytes" in problem


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("job-1", None),
        ("a" * 80, None),
        ("Ünïcode_名前", None),
        ("", "empty"),
        ("a" * 81, "longer than 80"),
        ("has space", "whitespace"),
        ("tab\there", "whitespace"),
        ("nbsp\u00a0here", "whitespace"),
        ("a/b", "'/'"),
        ("a:b", "':'"),
        ("a$b", "'$'"),
        ("a\\b", "'\\\\'"),
        ("bell\x07", "control character"),
        ("del\x7f", "control character"),
        ("c1\x85", "whitespace"),
        ("c1\x9f", "control character"),
    ],
)
def test_name_problem_follows_step_functions_rules(name: str, problem: str | None) -> None:
    """Names are 1-80 characters without whitespace, forbidden or control characters."""
    found = name_problem(name)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize("character", sorted('<>{}[]?*"#%\\^|~`$&,;:/'))
def test_name_problem_rejects_every_forbidden_character(character: str) -> None:
    """Each character Step Functions forbids in a name is refused."""
    assert name_problem(f"a{character}b") is not None


def test_plan_message_names_by_message_id_without_attribute() -> None:
    """Without an ExecutionName attribute, the SQS MessageId is the name."""
    assert plan_message(message(message_id="0b7c")) == Start(message(message_id="0b7c"), "0b7c")


def test_plan_message_uses_execution_name_attribute() -> None:
    """A String ExecutionName attribute names the execution."""
    queued = message(execution_name="order-17", execution_name_type="String")
    assert plan_message(queued) == Start(queued, "order-17")


def test_plan_message_accepts_custom_string_type() -> None:
    """A custom String type (String.label) is still a String attribute."""
    queued = message(execution_name="order-17", execution_name_type="String.id")
    assert plan_message(queued) == Start(queued, "order-17")


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"body": "nope"}, "not valid JSON"),
        ({"execution_name": "bad name", "execution_name_type": "String"}, "invalid ExecutionName"),
        ({"execution_name": "x" * 81, "execution_name_type": "String"}, "longer than 80"),
        ({"execution_name": "17", "execution_name_type": "Number"}, "must be of type String"),
        ({"execution_name": None, "execution_name_type": "Binary"}, "must be of type String"),
    ],
)
def test_plan_message_dead_letters_poison_with_reason(fields: dict[str, object], reason: str) -> None:
    """A message that can never start is dead-lettered with a reason naming the problem."""
    body = str(fields.pop("body", "{}"))
    decision = plan_message(message(body, **fields))
    assert isinstance(decision, DeadLetter)
    assert reason in decision.reason


def test_dispatch_error_keeps_short_reasons_and_bounds_long_ones() -> None:
    """Reasons are kept verbatim up to a bound, then cut with an ellipsis."""
    assert dispatch_error("short") == "short"
    long = dispatch_error("x" * 5000)
    assert len(long) == 512
    assert long.endswith("…")


def test_group_order_blocks_only_the_held_back_group() -> None:
    """After one message of a group is held back, later ones of that group wait; others don't."""
    order = GroupOrder()
    first_a, second_a, first_b = message(group="a"), message(group="a", message_id="m-2"), message(group="b")
    assert order.may_start(first_a)
    order.hold_back(first_a)
    assert not order.may_start(second_a)
    assert order.may_start(first_b)


def test_review_recent_starts_keeps_listed_and_checks_unlisted() -> None:
    """A listed start is neither checked nor forgotten (a later list may omit it); unlisted is checked."""
    listed = ListedRunning(count=1, names=frozenset({"seen"}), complete=True)
    review = review_recent_starts([record("seen", 5), record("unseen", 5)], listed, NOW)
    assert review.resolved == ()
    assert [r.name for r in review.to_check] == ["unseen"]


def test_review_recent_starts_resolves_records_older_than_window() -> None:
    """A record older than the window no longer counts: the list is consistent by then."""
    listed = ListedRunning(count=0, names=frozenset(), complete=True)
    review = review_recent_starts([record("old", RECENT_START_WINDOW_SECONDS + 1)], listed, NOW)
    assert [r.name for r in review.resolved] == ["old"]
    assert review.to_check == ()


def test_review_recent_starts_judges_a_name_recorded_twice_by_its_newest_record() -> None:
    """A redelivered message recorded twice holds one slot, for as long as its newest record."""
    listed = ListedRunning(count=0, names=frozenset(), complete=True)
    older, newer = record("twice", 80), record("twice", 10)
    review = review_recent_starts([older, newer], listed, NOW)
    assert review.to_check == (newer,)
    assert review.resolved == (older,)


def test_review_recent_starts_checks_oldest_first() -> None:
    """Unlisted records are checked oldest first, the ones closest to leaving the window."""
    listed = ListedRunning(count=0, names=frozenset(), complete=True)
    review = review_recent_starts([record("new", 1), record("old", 50), record("mid", 20)], listed, NOW)
    assert [r.name for r in review.to_check] == ["old", "mid", "new"]


@pytest.mark.parametrize(
    ("status", "age", "counts"),
    [
        ("RUNNING", 10, True),
        ("PENDING_REDRIVE", 10, True),
        ("SUCCEEDED", 1, False),
        ("FAILED", 1, False),
        ("ABORTED", 1, False),
        ("TIMED_OUT", 1, False),
        (None, 10, True),
        (None, RECENT_START_WINDOW_SECONDS, True),
        (None, RECENT_START_WINDOW_SECONDS + 0.001, False),
    ],
)
def test_still_counts_until_step_functions_knows(status: str | None, age: float, counts: bool) -> None:
    """An unlisted start holds a slot while it runs, or for 90 s if it never started."""
    assert still_counts(status, record("x", age), NOW) is counts


@pytest.mark.parametrize(
    ("event", "label"),
    [
        ({"detail-type": "Scheduled Event", "source": "aws.events"}, "Scheduled Event"),
        ({"detail-type": "Step Functions Execution Status Change"}, "Step Functions Execution Status Change"),
        ({}, "manual or EventBridge Scheduler"),
        ({"anything": [1, 2]}, "manual or EventBridge Scheduler"),
        ([1, 2], "unrecognised event of type list"),
        (None, "unrecognised event of type NoneType"),
    ],
)
def test_describe_trigger_labels_any_event(event: object, label: str) -> None:
    """Every event shape gets a label; none is refused."""
    assert describe_trigger(event) == label


ATTRIBUTE_NAMES = {"error_attribute": "DispatchError", "first": "ExecutionName"}


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def test_dead_letter_attributes_copy_the_source_and_add_the_reason() -> None:
    """String attributes are copied as they are; DispatchError carries the reason."""
    source = {"ExecutionName": _string("job-1"), "Tenant": _string("t-9")}
    attributes = dead_letter_attributes(source, "input is not valid JSON", **ATTRIBUTE_NAMES)
    assert attributes == {**source, "DispatchError": _string("input is not valid JSON")}


def test_dead_letter_attributes_stay_within_the_sqs_limit_and_name_what_was_left_out() -> None:
    """With ten source attributes, ExecutionName and eight others are copied; the reason names the rest."""
    source = {f"a{index}": _string(str(index)) for index in range(9)}
    source["ExecutionName"] = _string("job-1")
    source["Blob"] = {"DataType": "Binary"}
    attributes = dead_letter_attributes(source, "invalid", **ATTRIBUTE_NAMES)
    assert len(attributes) == SQS_MAX_MESSAGE_ATTRIBUTES
    assert "ExecutionName" in attributes
    assert attributes["DispatchError"]["StringValue"] == "invalid (attributes not copied: Blob, a8)"


def test_dead_letter_attributes_replace_a_forged_dispatch_error() -> None:
    """A producer's own DispatchError attribute is replaced by the dispatcher's reason."""
    attributes = dead_letter_attributes({"DispatchError": _string("forged")}, "real", **ATTRIBUTE_NAMES)
    assert attributes == {"DispatchError": _string("real")}


def test_dead_letter_headroom_fits_the_longest_dispatch_error() -> None:
    """The source queue's size limit leaves room for the DispatchError the DLQ copy adds."""
    longest = "DispatchError" + "String" + "\U0010ffff" * DISPATCH_ERROR_MAX_LENGTH
    assert len(longest.encode()) <= DEAD_LETTER_HEADROOM_BYTES
