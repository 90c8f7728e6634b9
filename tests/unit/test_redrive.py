"""Redrives without AWS: redrive messages, the decision to redrive, its token, and how a redrive counts."""

from __future__ import annotations

import pytest

from dispatcher.core.admission import DeadLetter, Redrive, Start, plan_message
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS, LedgerStart, still_counts
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.redrive import RedriveDecision, RedriveVerdict, redrive_decision, redrive_token
from dispatcher.producer import Job

NOW = 1_800_000_000.0
ARN = "arn:aws:states:us-east-1:123456789012:execution:jobs:order-1"


def redrive_message(**attributes: dict[str, str]) -> QueuedMessage:
    """A redrive request as the CLI queues it, with ``attributes`` changed."""
    given = {
        "ExecutionName": {"DataType": "String", "StringValue": "order-1"},
        "DispatchAction": {"DataType": "String", "StringValue": "redrive"},
        "RedriveCount": {"DataType": "Number", "StringValue": "2"},
        **attributes,
    }
    given = {key: value for key, value in given.items() if value}
    name = given.get("ExecutionName")
    return QueuedMessage(
        message_id="m-1",
        receipt_handle="r",
        body="{}",
        group_id="g",
        execution_name=None if name is None else name["StringValue"],
        execution_name_type=None if name is None else name["DataType"],
        attributes=given,
    )


def test_a_redrive_message_plans_a_redrive_of_the_named_execution_at_its_count() -> None:
    """DispatchAction redrive + ExecutionName + RedriveCount: a redrive, not a start."""
    decision = plan_message(redrive_message())
    assert isinstance(decision, Redrive)
    assert (decision.name, decision.redrive_count) == ("order-1", 2)


def test_messages_valid_before_redrive_existed_still_start() -> None:
    """No DispatchAction, or DispatchAction start: the start of today."""
    plain = plan_message(redrive_message(DispatchAction={}, RedriveCount={}))
    explicit = plan_message(redrive_message(DispatchAction={"DataType": "String", "StringValue": "start"}))
    assert isinstance(plain, Start)
    assert not isinstance(plain, Redrive)
    assert isinstance(explicit, Start)
    assert not isinstance(explicit, Redrive)


@pytest.mark.parametrize(
    ("attributes", "reason"),
    [
        ({"DispatchAction": {"DataType": "String", "StringValue": "rerun"}}, "must be 'start' or 'redrive'"),
        ({"DispatchAction": {"DataType": "Number", "StringValue": "1"}}, "must be of type String"),
        ({"ExecutionName": {}}, "needs the ExecutionName attribute"),
        ({"RedriveCount": {}}, "needs the RedriveCount attribute"),
        ({"RedriveCount": {"DataType": "Number", "StringValue": "-1"}}, "an integer >= 0"),
        ({"RedriveCount": {"DataType": "String", "StringValue": "two"}}, "not 'two'"),
    ],
)
def test_a_malformed_redrive_message_is_dead_lettered_with_its_reason(
    attributes: dict[str, dict[str, str]], reason: str
) -> None:
    """A redrive that can never happen goes to the DLQ saying why."""
    decision = plan_message(redrive_message(**attributes))
    assert isinstance(decision, DeadLetter)
    assert reason in decision.reason


@pytest.mark.parametrize(
    ("status", "count", "expected"),
    [
        ("FAILED", 2, "redrive"),
        ("TIMED_OUT", 2, "redrive"),
        ("ABORTED", 2, "redrive"),
        ("RUNNING", 3, "done"),  # this job's redrive happened (a redelivery after a crash)
        ("PENDING_REDRIVE", 2, "done"),
        ("RUNNING", 2, "wait"),  # a read from before the failure the job was made from
        ("FAILED", 3, "done"),  # redriven since, and failed again: never twice
        ("SUCCEEDED", 3, "done"),
        ("FAILED", 1, "wait"),  # the read lags behind what the job was made from
    ],
)
def test_redrive_decision_never_redrives_twice(status: str, count: int, expected: str) -> None:
    """Status and redriveCount tell whether this job's redrive already happened."""
    start = Redrive(redrive_message(), "order-1", redrive_count=2)
    assert redrive_decision(status, count, start, NOW) == RedriveDecision(RedriveVerdict(expected))


def test_redrive_decision_dead_letters_what_cannot_be_redriven() -> None:
    """A missing execution, or one that SUCCEEDED without a redrive, can never be redriven."""
    start = Redrive(redrive_message(), "order-1", redrive_count=0)
    missing = redrive_decision(None, 0, start, NOW)
    assert missing.verdict is RedriveVerdict.REFUSE
    assert "no execution named 'order-1'" in missing.reason
    succeeded = redrive_decision("SUCCEEDED", 0, start, NOW)
    assert succeeded.verdict is RedriveVerdict.REFUSE
    assert "SUCCEEDED, which can't be redriven" in succeeded.reason


def test_redrive_decision_waits_for_an_execution_describe_may_not_show_yet() -> None:
    """Missing while the job is young (DescribeExecution lags a new execution): wait; later: dead-letter."""
    message = redrive_message().model_copy(update={"sent_at": NOW - 30})
    start = Redrive(message, "order-1", redrive_count=0)
    wait = RedriveDecision(RedriveVerdict.WAIT)
    assert redrive_decision(None, 0, start, NOW) == wait
    assert redrive_decision(None, 0, start, NOW - 30 + RECENT_START_WINDOW_SECONDS) == wait
    late = redrive_decision(None, 0, start, NOW - 30 + RECENT_START_WINDOW_SECONDS + 1)
    assert late == RedriveDecision(RedriveVerdict.REFUSE, "redrive: no execution named 'order-1'")


def test_redrive_token_is_the_same_for_one_redrive_and_fits_the_api() -> None:
    """One token per (execution, count): a retried call is idempotent, the next redrive is not."""
    assert redrive_token(ARN, 0) == redrive_token(ARN, 0)
    assert redrive_token(ARN, 0) != redrive_token(ARN, 1)
    assert redrive_token(ARN, 0) != redrive_token(ARN + "x", 0)
    assert len(redrive_token(ARN, 10**9)) <= 64


def test_a_redrive_job_carries_its_action_and_count() -> None:
    """The producer client sends a redrive job's attributes; it refuses one without a name."""
    job = Job("{}", "g", "order-1", redrive_count=0)
    assert job.attributes() == {
        "ExecutionName": {"DataType": "String", "StringValue": "order-1"},
        "DispatchAction": {"DataType": "String", "StringValue": "redrive"},
        "RedriveCount": {"DataType": "Number", "StringValue": "0"},
    }
    assert Job("{}", "g", None, redrive_count=0).problem() is not None
    assert Job("{}", "g", "order-1").attributes() == {
        "ExecutionName": {"DataType": "String", "StringValue": "order-1"}
    }
    assert job.payload_bytes() > Job("{}", "g", "order-1").payload_bytes()


def test_a_recorded_redrive_counts_until_a_read_shows_the_redrive() -> None:
    """A read that still shows the failure being redriven (its old redriveCount) frees nothing."""
    record = LedgerStart(name="order-1", recorded_at=NOW - 10, sort_key="k", redrive_count=2)
    assert still_counts("FAILED", record, NOW, redrive_count=2), "stale: the redrive isn't shown yet"
    assert not still_counts("FAILED", record, NOW + RECENT_START_WINDOW_SECONDS, redrive_count=2)
    assert still_counts("RUNNING", record, NOW, redrive_count=3)
    assert not still_counts("FAILED", record, NOW, redrive_count=3), "the redriven run ended"
    plain = LedgerStart(name="order-1", recorded_at=NOW - 10, sort_key="k")
    assert not still_counts("FAILED", plain, NOW, redrive_count=2)
