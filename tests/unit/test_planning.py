"""The planning core: capacity, names, validation, order, end events, dead letters — no AWS, no clock."""

from __future__ import annotations

import json

import pytest

from dispatcher.core.admission import DeadLetter, GroupOrder, Start, admit, by_group, plan_message
from dispatcher.core.batching import receive_size, round_size
from dispatcher.core.events import EndedExecution, describe_trigger, ended_execution
from dispatcher.core.executions import MAX_INPUT_BYTES, input_problem, name_problem
from dispatcher.core.messages import (
    DEAD_LETTER_HEADROOM_BYTES,
    DISPATCH_ERROR_MAX_LENGTH,
    SQS_MAX_MESSAGE_ATTRIBUTES,
    dead_letter_attributes,
    dispatch_error,
)
from tests.inputs import json_of_size
from tests.support.events import MACHINE, message, status_change


@pytest.mark.parametrize(("free", "expected"), [(0, 0), (1, 1), (3, 3), (10, 10), (11, 10), (500, 10)])
def test_receive_size_is_free_capped_at_ten(free: int, expected: int) -> None:
    """One receive asks for no more than the free slots, and SQS's limit of 10."""
    assert receive_size(free) == expected


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


def test_group_order_blocks_only_the_waiting_group() -> None:
    """After one message of a group is held back, later ones of that group wait; others don't."""
    order = GroupOrder()
    first_a, second_a, first_b = message(group="a"), message(group="a", message_id="m-2"), message(group="b")
    assert order.may_start(first_a)
    order.wait(first_a)
    assert not order.may_start(second_a)
    assert order.may_start(first_b)


def test_round_size_is_free_capped_at_a_hundred() -> None:
    """One round receives at most 100 messages, never more than the free slots."""
    assert [round_size(free) for free in (0, 7, 100, 5000)] == [0, 7, 100, 100]


def test_admit_starts_up_to_free_in_receive_order() -> None:
    """The first `free` valid messages start; the rest are held back."""
    received = [message(message_id=f"m-{index}", group=f"g{index}") for index in range(5)]
    admission = admit(received, 3)
    assert [start.name for start in admission.starts] == ["m-0", "m-1", "m-2"]
    assert admission.waiting == tuple(received[3:])


def test_admit_dead_letters_poison_without_spending_a_slot() -> None:
    """Poison goes to the DLQ and leaves its slot to the next message."""
    received = [message("nope", message_id="bad"), message(message_id="ok", group="h")]
    admission = admit(received, 1)
    assert [letter.message.message_id for letter in admission.dead_letters] == ["bad"]
    assert [start.name for start in admission.starts] == ["ok"]


def test_admit_holds_back_the_rest_of_a_group_behind_a_held_message() -> None:
    """Once a group has a message held back, its later messages (poison too) are held back."""
    received = [
        message(message_id="a1", group="a"),
        message(message_id="b1", group="b"),
        message("nope", message_id="b2", group="b"),
        message(message_id="c1", group="c"),
    ]
    admission = admit(received, 1)
    assert [start.name for start in admission.starts] == ["a1"]
    assert [held.message_id for held in admission.waiting] == ["b1", "b2", "c1"]
    assert admission.dead_letters == ()


def test_by_group_keeps_send_order_within_each_group() -> None:
    """Starts split per group, each sequence in receive order, groups in order of first appearance."""
    received = [message(message_id=name, group=name[0]) for name in ("a1", "b1", "a2", "c1", "b2", "a3")]
    groups = by_group(admit(received, 10).starts)
    assert [[start.name for start in group] for group in groups] == [["a1", "a2", "a3"], ["b1", "b2"], ["c1"]]


@pytest.mark.parametrize("status", ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"])
def test_ended_execution_reads_a_closed_status_change(status: str) -> None:
    """A closed status change of the target state machine names the execution and its stop."""
    assert ended_execution(status_change(status=status), MACHINE) == EndedExecution(
        name="job-1", stopped_at=1_795_262_404.5, state_machine_arn=MACHINE
    )


@pytest.mark.parametrize(
    "event",
    [
        status_change(status="RUNNING", stopDate=None),
        status_change(status="PENDING_REDRIVE"),
        status_change(stateMachineArn=MACHINE + "-other"),
        status_change(name="bad name"),
        status_change(stopDate="yesterday"),
        status_change(stopDate=True),
        {**status_change(), "detail-type": "Scheduled Event"},
        {"detail-type": "Step Functions Execution Status Change", "detail": {}},
        {"detail-type": "Step Functions Execution Status Change", "detail": "nope"},
        {},
        [],
        None,
        "text",
    ],
    ids=[
        "running",
        "pending-redrive",
        "other-state-machine",
        "invalid-name",
        "stop-date-text",
        "stop-date-bool",
        "other-detail-type",
        "empty-detail",
        "detail-not-object",
        "empty",
        "list",
        "null",
        "string",
    ],
)
def test_ended_execution_is_none_for_any_other_event(event: object) -> None:
    """Another state machine, an open status or a malformed event is an ordinary tick."""
    assert ended_execution(event, MACHINE) is None


def test_ended_execution_falls_back_to_the_event_time_without_stop_date() -> None:
    """Without detail.stopDate the event's own time is the stop."""
    event = status_change()
    del event["detail"]["stopDate"]  # type: ignore[attr-defined]
    assert ended_execution(event, MACHINE) == EndedExecution(
        name="job-1", stopped_at=1_795_262_405.0, state_machine_arn=MACHINE
    )


def test_ended_execution_without_any_stop_time_is_none() -> None:
    """With neither stopDate nor time the stop is unknown, so a redrive couldn't be told: ignored."""
    event = status_change(stopDate=None)
    del event["time"]
    assert ended_execution(event, MACHINE) is None


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


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def test_dead_letter_attributes_copy_the_source_and_add_the_reason() -> None:
    """String attributes are copied as they are; DispatchError carries the reason."""
    source = {"ExecutionName": _string("job-1"), "Tenant": _string("t-9")}
    attributes = dead_letter_attributes(source, "input is not valid JSON")
    assert attributes == {**source, "DispatchError": _string("input is not valid JSON")}


def test_dead_letter_attributes_stay_within_the_sqs_limit_and_name_what_was_left_out() -> None:
    """With ten source attributes, ExecutionName and eight others are copied; the reason names the rest."""
    source = {f"a{index}": _string(str(index)) for index in range(9)}
    source["ExecutionName"] = _string("job-1")
    source["Blob"] = {"DataType": "Binary"}
    attributes = dead_letter_attributes(source, "invalid")
    assert len(attributes) == SQS_MAX_MESSAGE_ATTRIBUTES
    assert "ExecutionName" in attributes
    assert attributes["DispatchError"]["StringValue"] == "invalid (attributes not copied: Blob, a8)"


def test_dead_letter_attributes_replace_a_forged_dispatch_error() -> None:
    """A producer's own DispatchError attribute is replaced by the dispatcher's reason."""
    attributes = dead_letter_attributes({"DispatchError": _string("forged")}, "real")
    assert attributes == {"DispatchError": _string("real")}


def test_dead_letter_headroom_fits_the_longest_dispatch_error() -> None:
    """The source queue's size limit leaves room for the DispatchError the DLQ copy adds."""
    longest = "DispatchError" + "String" + "\U0010ffff" * DISPATCH_ERROR_MAX_LENGTH
    assert len(longest.encode()) <= DEAD_LETTER_HEADROOM_BYTES
