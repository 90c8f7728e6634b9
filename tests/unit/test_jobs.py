"""Deadlines, cancellations and a job's one state: pure, without AWS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from dispatcher.adapters.job_items import pending_name_item, read_pending
from dispatcher.core.admission import DeadLetter, Expired
from dispatcher.core.jobs import (
    Cancellations,
    ExecutionFacts,
    GroupCancellation,
    JobRecord,
    JobState,
    Screened,
    deadline_of,
    expiry,
    hold_seconds,
    job_name,
    job_report,
    record_of_dead_letter,
    screen,
    start_by_text,
    waited,
)
from dispatcher.core.messages import Job, QueuedMessage, parse_start_by
from dispatcher.core.outcomes import Outcome
from dispatcher.producer import JobRejectedError, Producer

SENT = 1_800_000_000.0


def _message(
    start_by: str | None = None, *, sent_at: float | None = SENT, name: str | None = None, group: str = "g"
) -> QueuedMessage:
    attributes = {} if start_by is None else {"StartBy": {"DataType": "String", "StringValue": start_by}}
    if name is not None:
        attributes["ExecutionName"] = {"DataType": "String", "StringValue": name}
    return QueuedMessage(
        message_id="m-1",
        receipt_handle="r",
        body="{}",
        group_id=group,
        execution_name=name,
        execution_name_type=None if name is None else "String",
        sent_at=sent_at,
        attributes=attributes,
    )


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2027-01-15T08:00:00Z", datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()),
        ("2027-01-15T09:00:00+01:00", datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()),
        ("2027-01-15T08:00:00.250z", datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp() + 0.25),
    ],
)
def test_start_by_is_an_iso_moment_with_a_utc_offset(text: str, expected: float) -> None:
    """``Z``, ``z`` or an offset; fractions kept."""
    assert parse_start_by(text) == expected


@pytest.mark.parametrize("text", ["2027-01-15T08:00:00", "tomorrow", "", "1800000000"])
def test_a_start_by_without_an_offset_or_not_a_moment_is_refused(text: str) -> None:
    """A local time would mean different moments to the producer and the dispatcher."""
    with pytest.raises(ValueError, match="ISO 8601 moment with a UTC offset"):
        parse_start_by(text)


def test_start_by_text_is_utc_to_the_second_rounded_up_and_refuses_a_naive_datetime() -> None:
    """Rounded up, never earlier than asked; a naive datetime is refused."""
    moment = datetime(2027, 1, 15, 9, 0, 0, 100_000, tzinfo=timezone(timedelta(hours=1)))
    assert start_by_text(moment) == "2027-01-15T08:00:01Z"
    with pytest.raises(ValueError, match="aware datetime"):
        start_by_text(datetime(2027, 1, 15, 8))


def test_the_earlier_of_start_by_and_the_lanes_bound_applies() -> None:
    """``StartBy`` 100 s after sending against a 60 s bound: the bound; against 600 s: ``StartBy``."""
    message = _message(_iso(SENT + 100))
    assert deadline_of(message, 60) is not None
    assert (deadline_of(message, 60).at, deadline_of(message, 60).source) == (SENT + 60, "max_wait_seconds")  # type: ignore[union-attr]
    assert (deadline_of(message, 600).at, deadline_of(message, 600).source) == (SENT + 100, "StartBy")  # type: ignore[union-attr]
    assert deadline_of(_message(), None) is None


def test_a_job_expires_only_when_received_after_its_deadline() -> None:
    """At the deadline it still starts; a moment after, it expires, saying when and how long it waited."""
    message = _message(_iso(SENT + 100))
    assert expiry(message, SENT + 100, None) is None
    letter = expiry(message, SENT + 190.5, None)
    assert letter is not None
    assert letter.reason == (
        f"expired: deadline {_iso(SENT + 100)} (StartBy) passed; received at {_iso(SENT + 190)}"
        " after waiting 3 min 10 s"
    )
    assert letter.outcome is Outcome.EXPIRED


def test_a_malformed_start_by_is_poison_not_an_expiry() -> None:
    """Dead-lettered as invalid, counted with the poison."""
    letter = expiry(_message("next week"), SENT, None)
    assert letter is not None
    assert letter.reason.startswith("invalid StartBy: ")
    assert letter.outcome is Outcome.DEAD_LETTERED
    binary = _message().model_copy(update={"attributes": {"StartBy": {"DataType": "Binary"}}})
    assert expiry(binary, SENT, None) == DeadLetter(
        binary, "invalid StartBy: StartBy attribute must be of type String"
    )


def test_a_held_job_is_shown_again_just_past_its_deadline_or_after_the_longest_hold() -> None:
    """Deadline 100 s away: held 101 s; none, or malformed: the longest; passed: 0."""
    message = _message(_iso(SENT + 100))
    assert hold_seconds(message, SENT, 14_400, None) == 101
    assert hold_seconds(_message(), SENT, 14_400, None) == 14_400
    assert hold_seconds(_message("soon"), SENT, 14_400, None) == 14_400
    assert hold_seconds(message, SENT + 500, 14_400, None) == 0


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0 s"), (42, "42 s"), (185, "3 min 5 s"), (7_800, "2 h 10 min"), (273_600, "3 d 4 h")],
)
def test_waits_are_said_as_people_say_them(seconds: float, said: str) -> None:
    """The two largest units."""
    assert waited(seconds) == said


def test_cancellations_take_a_name_and_a_groups_jobs_sent_until_it() -> None:
    """By name whatever its group; by group only the jobs sent at or before the cancellation."""
    cancellations = Cancellations(frozenset({"a"}), {"tenant": GroupCancellation("tenant", SENT, "left")})
    assert cancellations.cancels(_message(name="a"), "a") is True
    assert cancellations.cancels(_message(group="tenant"), "b") == GroupCancellation("tenant", SENT, "left")
    assert not cancellations.cancels(_message(group="tenant", sent_at=SENT + 1), "b")
    assert not cancellations.cancels(_message(group="other"), "b")
    assert not Cancellations()


def test_a_jobs_name_is_its_execution_name_else_its_message_id() -> None:
    """A non-String ``ExecutionName`` gives none."""
    assert job_name(_message()) == "m-1"
    assert job_name(_message(name="order-1")) == "order-1"
    assert job_name(_message().model_copy(update={"execution_name_type": "Binary"})) is None


def test_one_state_the_execution_first_then_the_record_then_held_then_not_started() -> None:
    """Each source in turn; a stopped job's reason comes with its execution's state."""
    facts = ExecutionFacts("arn:x", "ABORTED", SENT, SENT + 5)
    record = JobRecord("default", "j", JobState.CANCELLED, "not wanted", SENT)
    stopped = job_report("j", "default", execution=facts, record=record, held_at=None)
    assert stopped.as_json() == {
        "name": "j",
        "lane": "default",
        "state": "aborted",
        "execution_arn": "arn:x",
        "started_at": _iso(SENT),
        "stopped_at": _iso(SENT + 5),
        "reason": "not wanted",
    }
    assert job_report("j", "default", execution=None, record=record, held_at=None).state is JobState.CANCELLED
    assert job_report("j", "default", execution=None, record=None, held_at=SENT).state is JobState.HELD
    assert job_report("j", "default", execution=None, record=None, held_at=None).state is JobState.NOT_STARTED


def test_a_dead_letters_record_keeps_its_deadline_when_it_expired() -> None:
    """Expired: the deadline; poison: none; a name too long to be one: no record."""
    message = _message(_iso(SENT + 100))
    expired = record_of_dead_letter("default", Expired(message, "expired: ..."), SENT + 200, None)
    assert expired is not None
    assert (expired.state, expired.deadline) == (JobState.EXPIRED, SENT + 100)
    poison = record_of_dead_letter("default", DeadLetter(message, "input is not valid JSON"), SENT, None)
    assert poison is not None
    assert (poison.state, poison.deadline) == (JobState.DEAD_LETTERED, None)
    assert (
        record_of_dead_letter("default", DeadLetter(_message(name="x" * 300), "invalid"), SENT, None) is None
    )


def test_a_producer_refuses_a_deadline_that_has_passed_and_takes_iso_text() -> None:
    """`Producer.send`: a StartBy an hour ago, or not a moment, is refused; ISO text is a deadline too."""
    producer = Producer("https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo")
    with pytest.raises(JobRejectedError, match="has passed: the job would expire unstarted"):
        producer.send("{}", group="g", start_by=datetime.now(UTC) - timedelta(hours=1))
    with pytest.raises(JobRejectedError, match="must be an ISO 8601 moment with a UTC offset"):
        producer.send("{}", group="g", start_by="tomorrow")
    with pytest.raises(JobRejectedError, match="not int"):
        producer.send("{}", group="g", start_by=1_800_000_000)  # type: ignore[arg-type]
    assert start_by_text("2030-01-01T10:00:00.2+02:00") == "2030-01-01T08:00:01Z"
    result = producer.send_batch([Job("{}", "g", start_by="2020-01-01T00:00:00Z")])
    assert [failure.reason for failure in result.failed] == [
        "StartBy 2020-01-01T00:00:00Z has passed: the job would expire unstarted; give a moment in the future"
    ]


def test_a_job_is_cancelled_in_advance_only_when_surely_sent_after_its_names_cancellation() -> None:
    """To the second the entry keeps: sent more than a second after it, in advance; else maybe not."""
    pending = read_pending(
        [
            pending_name_item("key", "default", "order-7", SENT - 10.6),
            pending_name_item("key", "default", "x", SENT),
        ]
    )["default"]
    assert pending.cancelled_at["order-7"] == int(SENT - 10.6)
    assert pending.in_advance(_message(name="order-7"), "order-7")
    assert not pending.in_advance(_message(name="x"), "x"), "sent in the second it was cancelled"
    assert not pending.in_advance(_message(name="order-7", sent_at=None), "order-7")
    assert not pending.in_advance(_message(name="other"), "other")


def test_a_screen_drops_the_cancelled_admitted_and_waiting_jobs_and_says_why() -> None:
    """By name or by group, admitted or waiting: what cancelled each, and which were cancelled in advance."""
    group = GroupCancellation("noisy", before=SENT, reason="")
    cancellations = Cancellations(
        names=frozenset({"late", "typo"}),
        groups={"noisy": group},
        cancelled_at={"late": SENT - 10, "typo": SENT},
    )
    late = _message(name="late").model_copy(update={"message_id": "m-late"})
    kept = _message(name="kept").model_copy(update={"message_id": "m-kept"})
    typo = _message(name="typo").model_copy(update={"message_id": "m-typo"})
    noisy = _message(group="noisy").model_copy(update={"message_id": "m-noisy"})
    screened = screen(cancellations, [(late, "late"), (kept, "kept")], [typo, noisy])
    assert screened.started == {"late"}
    assert screened.dropped == (typo, noisy)
    assert screened.why == {"m-late": True, "m-typo": True, "m-noisy": group}
    assert screened.in_advance == {"m-late"}, "sent 10 s after its name's cancellation; typo: the same second"
    assert screen(Cancellations(), [(kept, "kept")], [noisy]) == Screened()
