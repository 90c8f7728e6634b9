"""Jobs a producer follows, cancels and bounds: deadlines, cancellations and a job's one state. Pure.

A job is named by its execution name within a lane. A deadline is the earlier of its
``StartBy`` attribute and its lane's ``max_wait_seconds`` after it was sent; a job a tick
receives after it never starts. A cancellation names one job, or a message group's jobs sent
before it; a tick drops a job it names instead of starting it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from dispatcher.core.admission import DeadLetter, Expired
from dispatcher.core.messages import START_BY_ATTRIBUTE, QueuedMessage, parse_start_by
from dispatcher.core.rerun import iso

EXPIRED_PREFIX = "expired:"
"""How the `DispatchError` of a job that expired begins."""
CANCELLATION_LIFETIME_SECONDS = 14 * 24 * 3600
"""A cancellation is kept this long: the queue's longest retention."""
CANCELLED_ERROR = "dispatcher.Cancelled"
"""The error `cancel --stop` stops a running execution with."""


class JobState(StrEnum):
    """The one state `dispatcher job` reports for a job."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ABORTED = "aborted"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    DEAD_LETTERED = "dead-lettered"
    HELD = "held"
    NOT_STARTED = "not started"


EXECUTION_STATES = {
    "RUNNING": JobState.RUNNING,
    "PENDING_REDRIVE": JobState.RUNNING,
    "SUCCEEDED": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "TIMED_OUT": JobState.TIMED_OUT,
    "ABORTED": JobState.ABORTED,
}
"""An execution's status → the job's state."""


def start_by_text(moment: datetime | str) -> str:
    """A ``StartBy`` value from an aware datetime or ISO 8601 text (UTC, whole seconds up).

    ``ValueError`` for a naive datetime, text that isn't a moment with a UTC offset, or
    anything else.
    """
    if isinstance(moment, str):
        return iso(math.ceil(parse_start_by(moment)))
    if not isinstance(moment, datetime):
        raise ValueError(
            f"start_by must be an aware datetime or ISO 8601 text such as 2026-11-27T10:00:00Z,"
            f" not {type(moment).__name__}"
        )
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("start_by must be an aware datetime (with a UTC offset), e.g. datetime.now(UTC)")
    return iso(math.ceil(moment.timestamp()))


def waited(seconds: float) -> str:
    """A wait as people say it: ``42 s``, ``3 min 5 s``, ``2 h 10 min``, ``3 d 4 h``."""
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    shown = [f"{value} {unit}" for value, unit in parts if value]
    return " ".join(shown[:2]) or "0 s"


@dataclass(frozen=True)
class Deadline:
    """When a job must have been received by to start, and what set it."""

    at: float
    source: str
    """``StartBy``, or ``max_wait_seconds`` (the lane's bound)."""


def deadline_of(message: QueuedMessage, max_wait_seconds: int | None) -> Deadline | None:
    """The earlier of the message's ``StartBy`` and its lane's bound after it was sent (None: neither).

    Raises ``ValueError`` for a malformed ``StartBy`` (the message is poison).
    """
    deadlines: list[Deadline] = []
    value = message.attributes.get(START_BY_ATTRIBUTE)
    if value is not None:
        if not value.get("DataType", "").startswith("String") or "StringValue" not in value:
            raise ValueError(f"{START_BY_ATTRIBUTE} attribute must be of type String")
        deadlines.append(Deadline(parse_start_by(value["StringValue"]), START_BY_ATTRIBUTE))
    if max_wait_seconds is not None and message.sent_at is not None:
        deadlines.append(Deadline(message.sent_at + max_wait_seconds, "max_wait_seconds"))
    return min(deadlines, key=lambda deadline: deadline.at, default=None)


def expiry(message: QueuedMessage, now: float, max_wait_seconds: int | None) -> DeadLetter | None:
    """Why a message received at ``now`` can never start (`Expired`, or poison: a bad ``StartBy``), or None.

    ``now``: the moment before the receive that handed it out, so a job expires only when
    it was surely received after its deadline. An expired job's reason begins with
    `EXPIRED_PREFIX`.
    """
    try:
        deadline = deadline_of(message, max_wait_seconds)
    except ValueError as error:
        return DeadLetter(message, f"invalid {START_BY_ATTRIBUTE}: {error}")
    if deadline is None or now <= deadline.at:
        return None
    wait = "" if message.sent_at is None else f" after waiting {waited(now - message.sent_at)}"
    return Expired(
        message,
        f"{EXPIRED_PREFIX} deadline {iso(deadline.at)} ({deadline.source}) passed;"
        f" received at {iso(now)}{wait}",
    )


def hold_seconds(message: QueuedMessage, now: float, longest: int, max_wait_seconds: int | None) -> int:
    """How long to hold a job in flight: ``longest``, or until just past its deadline (to expire on time)."""
    try:
        deadline = deadline_of(message, max_wait_seconds)
    except ValueError:
        return longest
    if deadline is None:
        return longest
    return max(0, min(longest, math.ceil(deadline.at - now) + 1))


@dataclass(frozen=True)
class GroupCancellation:
    """A message group's cancellation: its jobs sent at or before ``before`` never start."""

    group: str
    before: float
    reason: str


@dataclass(frozen=True)
class Cancellations:
    """A lane's pending cancellations, as one read found them: jobs by name, and message groups."""

    names: frozenset[str] = frozenset()
    groups: Mapping[str, GroupCancellation] = field(default_factory=dict)
    cancelled_at: Mapping[str, float] = field(default_factory=dict)
    """Name → when it was cancelled, to the second or earlier (as its entry keeps it)."""

    def __bool__(self) -> bool:
        return bool(self.names or self.groups)

    def in_advance(self, message: QueuedMessage, name: str | None) -> bool:
        """Whether this job was surely sent after its name's cancellation (cancelled in advance).

        The entry keeps the moment to the second: a job sent in the same second or the next
        may have come first, and is not said to be.
        """
        at = None if name is None else self.cancelled_at.get(name)
        return at is not None and message.sent_at is not None and message.sent_at > at + 1

    def cancels(self, message: QueuedMessage, name: str | None) -> GroupCancellation | bool:
        """Whether the job this message carries (named ``name``) is cancelled: by name (True), by its group.

        A group's cancellation takes its jobs sent at or before the cancellation.
        """
        if name is not None and name in self.names:
            return True
        group = self.groups.get(message.group_id)
        if group is not None and message.sent_at is not None and message.sent_at <= group.before:
            return group
        return False


@dataclass(frozen=True)
class Screened:
    """What a round's cancellations take: its admitted jobs that never start, its waiting ones that leave."""

    started: frozenset[str] = frozenset()
    """Names of admitted jobs that are cancelled: their starts are never made."""
    dropped: tuple[QueuedMessage, ...] = ()
    """Waiting jobs that are cancelled: they leave their queue (`Outcome.CANCELLED`)."""
    why: Mapping[str, GroupCancellation | bool] = field(default_factory=dict)
    """Message id → what cancelled it: its group's cancellation, or True (by name)."""
    in_advance: frozenset[str] = frozenset()
    """Message ids of jobs surely sent after their name's cancellation."""


def screen(
    cancellations: Cancellations,
    admitted: Sequence[tuple[QueuedMessage, str]],
    waiting: Sequence[QueuedMessage],
) -> Screened:
    """The jobs ``cancellations`` take: of those admitted (message, name), and of those waiting. Pure."""
    why: dict[str, GroupCancellation | bool] = {}
    in_advance: set[str] = set()
    started: set[str] = set()
    dropped: list[QueuedMessage] = []
    for message, name, was_admitted in [
        *((message, name, True) for message, name in admitted),
        *((message, job_name(message), False) for message in waiting),
    ]:
        found = cancellations.cancels(message, name)
        if not found:
            continue
        why[message.message_id] = found
        if found is True and cancellations.in_advance(message, name):
            in_advance.add(message.message_id)
        if was_admitted:
            started.add(name or "")
        else:
            dropped.append(message)
    return Screened(frozenset(started), tuple(dropped), why, frozenset(in_advance))


def job_name(message: QueuedMessage) -> str | None:
    """The execution name a message's job goes by (its ``ExecutionName``, else its ``MessageId``)."""
    if message.execution_name_type is None:
        return message.message_id
    if not message.execution_name_type.startswith("String"):
        return None
    return message.execution_name


@dataclass(frozen=True)
class JobRecord:
    """What the dispatcher remembers of a job that never started: cancelled, expired or dead-lettered."""

    lane: str
    name: str
    state: JobState
    reason: str
    at: float
    """When it was cancelled (asked), expired or dead-lettered (epoch seconds)."""
    deadline: float | None = None
    stopped: bool = False
    """Cancelled while it ran: `cancel --stop` stopped its execution (a re-run must not start it again)."""


@dataclass(frozen=True)
class Dropped:
    """A job a tick dropped for a cancellation of its name: when, and when the job was sent.

    Kept beside the cancellation's record (which keeps its reason): a job sent after its
    name was cancelled was cancelled in advance, and `dispatcher job` says so.
    """

    lane: str
    name: str
    at: float
    """When the tick dropped it (epoch seconds)."""
    sent_at: float | None = None
    """The message's ``SentTimestamp``."""


def record_of_dead_letter(
    lane: str, letter: DeadLetter, now: float, max_wait: int | None
) -> JobRecord | None:
    """The record of a job the tick dead-lettered (expired, or poison); None when it has no name to keep."""
    message, reason = letter.message, letter.reason
    name = job_name(message)
    if name is None or not 1 <= len(name) <= MAX_RECORDED_NAME:
        return None
    expired = isinstance(letter, Expired)
    deadline = None
    if expired:
        try:
            found = deadline_of(message, max_wait)
        except ValueError:
            found = None
        deadline = None if found is None else found.at
    state = JobState.EXPIRED if expired else JobState.DEAD_LETTERED
    return JobRecord(lane, name, state, reason, now, deadline)


MAX_RECORDED_NAME = 256
"""A dead-lettered job's name longer than this (not a valid name) is not recorded."""


@dataclass(frozen=True)
class ExecutionFacts:
    """What `DescribeExecution` says of a job's execution: where to find it and when it ran."""

    arn: str
    status: str
    started_at: float
    stopped_at: float | None = None
    error: str | None = None
    """Its error once it failed, timed out or was stopped (`DescribeExecution`'s ``error``)."""


@dataclass(frozen=True)
class JobReport:
    """The one state `dispatcher job` reports, with what is known of it (`as_json` is ``--json``)."""

    name: str
    lane: str
    state: JobState
    execution_arn: str | None = None
    started_at: float | None = None
    stopped_at: float | None = None
    reason: str | None = None
    deadline: float | None = None
    rerun_as: str | None = None
    at: float | None = None
    """When it was cancelled, expired, dead-lettered or held."""
    error: str | None = None
    """A failed (or stopped) execution's error, as `DescribeExecution` says it."""
    dropped_at: float | None = None
    """When a tick dropped it for its name's cancellation (it was on the queue then)."""
    sent_at: float | None = None
    """When the dropped job was sent (its ``SentTimestamp``)."""
    slots: int | None = None
    """Its size, as recorded when it started (1 without ``Slots``; None: no execution to tell)."""

    @property
    def in_advance(self) -> bool:
        """Cancelled before it was sent: the cancellation of a name no job had yet."""
        return self.sent_at is not None and self.at is not None and self.sent_at > self.at

    def as_json(self) -> dict[str, object]:
        """``{"name", "lane", "state", ...}``: the fields known, times in ISO 8601."""
        document: dict[str, object] = {"name": self.name, "lane": self.lane, "state": str(self.state)}
        optional: dict[str, object | None] = {
            "execution_arn": self.execution_arn,
            "started_at": None if self.started_at is None else iso(self.started_at),
            "stopped_at": None if self.stopped_at is None else iso(self.stopped_at),
            "error": self.error,
            "reason": self.reason,
            "deadline": None if self.deadline is None else iso(self.deadline),
            "rerun_as": self.rerun_as,
            "at": None if self.at is None else iso(self.at),
            "dropped_at": None if self.dropped_at is None else iso(self.dropped_at),
            "sent_at": None if self.sent_at is None else iso(self.sent_at),
            "cancelled_in_advance": True if self.in_advance else None,
            "slots": self.slots,
        }
        document.update({key: value for key, value in optional.items() if value is not None})
        return document


def job_report(  # noqa: PLR0913 — each is one place a job's state can be found
    name: str,
    lane: str,
    *,
    execution: ExecutionFacts | None,
    record: JobRecord | None,
    held_at: float | None,
    rerun_as: str | None = None,
    dropped: Dropped | None = None,
) -> JobReport:
    """The one state of a job: its execution's, else its record's, else held, else not started.

    ``dropped``: a tick dropped it for its name's cancellation (when, and when it was sent).
    """
    if execution is not None:
        return JobReport(
            name,
            lane,
            EXECUTION_STATES.get(execution.status, JobState.RUNNING),
            execution_arn=execution.arn,
            started_at=execution.started_at,
            stopped_at=execution.stopped_at,
            reason=None if record is None or record.state is not JobState.CANCELLED else record.reason,
            rerun_as=rerun_as,
            # Stopped by `cancel --stop`: its error is the dispatcher's, whatever a read omits.
            error=execution.error or (CANCELLED_ERROR if record is not None and record.stopped else None),
        )
    if record is not None:
        return JobReport(
            name,
            lane,
            record.state,
            reason=record.reason,
            deadline=record.deadline,
            at=record.at,
            dropped_at=None if dropped is None else dropped.at,
            sent_at=None if dropped is None else dropped.sent_at,
        )
    if held_at is not None:
        return JobReport(name, lane, JobState.HELD, at=held_at)
    return JobReport(name, lane, JobState.NOT_STARTED)
