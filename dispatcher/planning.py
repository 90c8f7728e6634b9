"""Pure decisions of one tick: capacity, names, validation, ordering.

Nothing here performs I/O or reads a clock; time arrives as ``now`` (epoch seconds).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from dispatcher.models import (
    EndedExecution,
    QueuedMessage,
    RecordedStart,
    RunningListing,
    StatusChangeEvent,
)

MAX_INPUT_BYTES = 262_144
MAX_NAME_LENGTH = 80
MAX_GROUP_ID_LENGTH = 128
SQS_MAX_RECEIVE = 10
# Every ListExecutions page asks for the most AWS returns: a call costs one token of a
# small quota (5/s refill) whatever its size, and paging stops once MAX is counted.
LIST_PAGE_SIZE = 1000
# One admission round receives up to this many messages, records their starts in
# BatchWriteItem calls of 25 and starts them concurrently across message groups.
ROUND_SIZE = 100
# ListExecutions may omit an execution for up to 60 s after it started; a start
# recorded by a process that died before StartExecution must not hold a slot for
# longer than this, so the window is the lag plus a margin for the start call itself.
RECENT_START_WINDOW_SECONDS = 90.0
FORBIDDEN_NAME_CHARACTERS = frozenset('<>{}[]?*"#%\\^|~`$&,;:/')
ACTIVE_STATUSES = frozenset({"RUNNING", "PENDING_REDRIVE"})
CLOSED_STATUSES = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
DISPATCH_ERROR_MAX_LENGTH = 512
SQS_MAX_MESSAGE_BYTES = 1_048_576
SQS_MAX_MESSAGE_ATTRIBUTES = 10
# The source queue's MaximumMessageSize is this much below the DLQ's, so a dead-letter
# copy (the source message plus a DispatchError of at most 512 characters, 4 bytes
# each in UTF-8, and the attribute's name and type) always fits.
DEAD_LETTER_HEADROOM_BYTES = 4096
EXECUTION_NAME_ATTRIBUTE = "ExecutionName"
DISPATCH_ACTION_ATTRIBUTE = "DispatchAction"
"""Optional String attribute: ``start`` (the default) or ``redrive``."""
REDRIVE_COUNT_ATTRIBUTE = "RedriveCount"
"""With ``DispatchAction`` ``redrive``: the execution's ``redriveCount`` when the redrive was asked for."""
START_ACTION = "start"
REDRIVE_ACTION = "redrive"
REDRIVABLE_STATUSES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})
REDRIVE_TOKEN_LENGTH = 64


Item = TypeVar("Item")


def chunks(items: Sequence[Item], size: int) -> list[Sequence[Item]]:
    """``items`` in consecutive slices of at most ``size`` (AWS's batch limits)."""
    return [items[start : start + size] for start in range(0, len(items), size)]


def free_slots(max_concurrency: int, running: int) -> int:
    """Executions the dispatcher may start now: never negative."""
    return max(0, max_concurrency - running)


def receive_size(free: int) -> int:
    """How many messages one `ReceiveMessage` asks for (SQS returns 10 at most)."""
    return max(0, min(SQS_MAX_RECEIVE, free))


def round_size(free: int) -> int:
    """How many messages one admission round receives."""
    return max(0, min(ROUND_SIZE, free))


def _reject_constant(token: str) -> object:
    raise ValueError(f"{token} is not valid JSON")


def input_problem(body: str) -> str | None:
    """Why a message body can never be an execution input, or None when it can."""
    try:
        size = len(body.encode("utf-8"))
    except UnicodeEncodeError:
        return "input is not valid UTF-8"
    if size > MAX_INPUT_BYTES:
        return f"input is {size} bytes, larger than the {MAX_INPUT_BYTES}-byte Step Functions limit"
    try:
        json.loads(body, parse_constant=_reject_constant)
    except ValueError as error:
        return f"input is not valid JSON: {error}"
    return None


def name_problem(name: str) -> str | None:
    """Why a string can't be a Step Functions execution name, or None when it can."""
    if not name:
        return "execution name is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"execution name is {len(name)} characters, longer than {MAX_NAME_LENGTH}"
    for character in name:
        if character.isspace():
            return "execution name contains whitespace"
        if character in FORBIDDEN_NAME_CHARACTERS:
            return f"execution name contains the forbidden character {character!r}"
        if unicodedata.category(character) == "Cc":
            return "execution name contains a control character"
    return None


def group_problem(group: str) -> str | None:
    """Why a string can't be a FIFO ``MessageGroupId`` (1-128 printable ASCII, no space), or None."""
    if not 1 <= len(group) <= MAX_GROUP_ID_LENGTH:
        return f"message group id must be 1 to {MAX_GROUP_ID_LENGTH} characters, not {len(group)}"
    if not all("!" <= character <= "~" for character in group):
        return "message group id may hold only letters, digits and punctuation (printable ASCII, no space)"
    return None


def job_problem(body: str, group: str, name: str | None) -> str | None:
    """Why a job would never start (the rules the dispatcher applies on receipt), or None."""
    return input_problem(body) or group_problem(group) or (None if name is None else name_problem(name))


@dataclass(frozen=True)
class Start:
    """Start an execution with this name and the message body as input."""

    message: QueuedMessage
    name: str
    redrive_count: int | None = None
    """Set when the message asks to redrive execution ``name`` instead (its expected ``redriveCount``)."""

    @property
    def redrive(self) -> bool:
        """Whether this is a redrive of an existing execution rather than a new start."""
        return self.redrive_count is not None


@dataclass(frozen=True)
class DeadLetter:
    """The message can never start: send it to the DLQ with this reason."""

    message: QueuedMessage
    reason: str


def dispatch_error(reason: str) -> str:
    """A `DispatchError` attribute value: bounded, so the DLQ copy still fits in SQS."""
    if len(reason) <= DISPATCH_ERROR_MAX_LENGTH:
        return reason
    return reason[: DISPATCH_ERROR_MAX_LENGTH - 1] + "…"


def dead_letter_attributes(
    source: dict[str, dict[str, str]], reason: str, *, error_attribute: str, first: str
) -> dict[str, dict[str, str]]:
    """The attributes of a DLQ copy: the source's String/Number ones, then the reason.

    SQS allows ten attributes per message, so when the source has more, the reason
    attribute takes the place of the last copied one (``first`` is kept before any
    other), and the reason names every attribute left out (binary values aren't
    copied either).
    """
    copyable = sorted(
        (name for name, value in source.items() if name != error_attribute and "StringValue" in value),
        key=lambda name: (name != first, name),
    )
    kept = copyable[: SQS_MAX_MESSAGE_ATTRIBUTES - 1]
    left_out = sorted(set(source) - set(kept) - {error_attribute})
    if left_out:
        reason = f"{reason} (attributes not copied: {', '.join(left_out)})"
    attributes = {name: dict(source[name]) for name in kept}
    attributes[error_attribute] = {"DataType": "String", "StringValue": dispatch_error(reason)}
    return attributes


def plan_message(message: QueuedMessage) -> Start | DeadLetter:
    """Validate a message and pick its execution name (the attribute, else the MessageId)."""
    problem = input_problem(message.body)
    if problem is not None:
        return DeadLetter(message, problem)
    if message.execution_name_type is None:
        name = message.message_id
    elif not message.execution_name_type.startswith("String"):
        return DeadLetter(
            message,
            f"ExecutionName attribute must be of type String, not {message.execution_name_type}",
        )
    else:
        name = message.execution_name or ""
    problem = name_problem(name)
    if problem is not None:
        return DeadLetter(message, f"invalid ExecutionName: {problem}")
    return _plan_action(message, name)


def _attribute_text(message: QueuedMessage, attribute: str) -> tuple[str | None, str | None]:
    """The attribute's value and data type (None, None when absent)."""
    value = message.attributes.get(attribute)
    if value is None:
        return None, None
    return value.get("StringValue"), value.get("DataType", "")


def _plan_action(message: QueuedMessage, name: str) -> Start | DeadLetter:
    """A start, or a redrive of execution ``name`` when ``DispatchAction`` says so."""
    action, action_type = _attribute_text(message, DISPATCH_ACTION_ATTRIBUTE)
    if action_type is None or (action_type.startswith("String") and action == START_ACTION):
        return Start(message, name)
    count, _ = _attribute_text(message, REDRIVE_COUNT_ATTRIBUTE)
    problem = _redrive_problem(message, action, action_type, count)
    if problem is not None or count is None:
        return DeadLetter(message, problem or "")
    return Start(message, name, redrive_count=int(count))


def _redrive_problem(
    message: QueuedMessage, action: str | None, action_type: str, count: str | None
) -> str | None:
    """Why a message that isn't a plain start can't be a redrive either, or None."""
    if not action_type.startswith("String"):
        return f"{DISPATCH_ACTION_ATTRIBUTE} attribute must be of type String, not {action_type}"
    if action != REDRIVE_ACTION:
        return f"{DISPATCH_ACTION_ATTRIBUTE} must be {START_ACTION!r} or {REDRIVE_ACTION!r}, not {action!r}"
    if message.execution_name_type is None:
        return f"a redrive needs the {EXECUTION_NAME_ATTRIBUTE} attribute: the execution to redrive"
    if count is None or not count.strip().isdigit():
        return (
            f"a redrive needs the {REDRIVE_COUNT_ATTRIBUTE} attribute: the execution's redriveCount"
            f" (an integer >= 0) when the redrive was asked for, not {count!r}"
        )
    return None


def redrive_decision(status: str | None, redrive_count: int, start: Start, now: float) -> str:
    """What to do with a redrive job, given what `DescribeExecution` says ``now``.

    ``redrive``: call `RedriveExecution`; ``done``: it was redriven already (by this job
    before a crash, or by someone else: a higher ``redriveCount``), so the job is done;
    ``wait``: the read is older than the one the job was made from (eventual
    consistency), ask later. An execution `DescribeExecution` doesn't know yet may be
    one that started less than a minute ago (a quick failure, re-run at once): it is
    waited for until the job is ``RECENT_START_WINDOW_SECONDS`` old, as the job was
    sent after the execution started.
    Anything else is the reason the job can never be done (dead-letter it).
    """
    expected = start.redrive_count or 0
    if status is None:
        sent_at = start.message.sent_at
        if sent_at is not None and now - sent_at <= RECENT_START_WINDOW_SECONDS:
            return "wait"
        return f"redrive: no execution named {start.name!r}"
    if redrive_count > expected or status == "PENDING_REDRIVE":
        return "done"
    if redrive_count < expected or status in ACTIVE_STATUSES:
        # Older than the read the job was made from (RUNNING at the same count is the
        # run that failed, before it failed): the list and Describe lag. Ask again later.
        return "wait"
    if status not in REDRIVABLE_STATUSES:
        return f"redrive: execution {start.name!r} is {status}, which can't be redriven"
    return "redrive"


def redrive_token(execution_arn: str, redrive_count: int) -> str:
    """`RedriveExecution`'s ``clientToken``: the same for every attempt at one redrive (kept 15 min)."""
    digest = hashlib.sha256(execution_arn.encode()).hexdigest()
    return f"dispatcher-{redrive_count}-{digest}"[:REDRIVE_TOKEN_LENGTH]


@dataclass(frozen=True)
class Admission:
    """What one round does with the messages it received, decided before any call."""

    starts: tuple[Start, ...]
    """At most the free slots, in receive order: record these, then start them."""
    dead_letters: tuple[DeadLetter, ...]
    held_back: tuple[QueuedMessage, ...]
    """Beyond the free slots, or behind a held-back message of the same group."""


def admit(messages: Iterable[QueuedMessage], free: int) -> Admission:
    """Pick the messages a round starts, dead-letters and releases, in receive order.

    A message is only examined when there is a free slot for it, so poison waits behind a
    full cap like any other message; once one message of a group is held back, the later
    ones of that group are held back too, or they would start first.
    """
    starts: list[Start] = []
    dead_letters: list[DeadLetter] = []
    held_back: list[QueuedMessage] = []
    order = GroupOrder()
    for message in messages:
        if len(starts) >= free or not order.may_start(message):
            order.hold_back(message)
            held_back.append(message)
            continue
        decision = plan_message(message)
        if isinstance(decision, DeadLetter):
            dead_letters.append(decision)
        else:
            starts.append(decision)
    return Admission(tuple(starts), tuple(dead_letters), tuple(held_back))


def by_group(starts: Iterable[Start]) -> list[list[Start]]:
    """Starts split into one sequence per message group, each in receive (send) order.

    The sequences may run concurrently; the starts of one sequence run one after another.
    """
    groups: dict[str, list[Start]] = {}
    for start in starts:
        groups.setdefault(start.message.group_id, []).append(start)
    return list(groups.values())


@dataclass
class GroupOrder:
    """Keeps send order within each message group while a batch is being admitted.

    Once one message of a group is released, the later messages of that group
    received in the same tick must be released too, or they would start first.
    """

    blocked_groups: set[str] = field(default_factory=set)

    def may_start(self, message: QueuedMessage) -> bool:
        """True unless an earlier message of the same group was held back."""
        return message.group_id not in self.blocked_groups

    def hold_back(self, message: QueuedMessage) -> None:
        """Record that this message is released, blocking its group for the tick."""
        self.blocked_groups.add(message.group_id)


@dataclass(frozen=True)
class RunningCount:
    """How many executions hold a slot, as far as the listing and the state table tell."""

    running: int
    """Listed executions that still run, plus recorded starts that count without a check."""
    to_check: tuple[RecordedStart, ...] = ()
    """Recorded starts the list doesn't show: `DescribeExecution` tells whether each still runs."""
    resolved: tuple[RecordedStart, ...] = ()
    """Records that can go: too old to matter, superseded, or ended by an event."""


def latest_ends(ended: Iterable[EndedExecution]) -> dict[str, float]:
    """Name → the latest stop any status change event reported (events repeat and reorder)."""
    latest: dict[str, float] = {}
    for execution in ended:
        latest[execution.name] = max(execution.stopped_at, latest.get(execution.name, execution.stopped_at))
    return latest


def listed_as_running(redriven_at: float | None, stopped_at: float | None) -> bool:
    """Whether a listed execution holds a slot, given the latest stop an event reported for it.

    ``ListExecutions`` keeps listing an execution for a while after it ended, so one that
    an event says has ended doesn't count; unless the list shows it redriven after that
    stop, because then it is running again.
    """
    if stopped_at is None:
        return True
    return redriven_at is not None and redriven_at > stopped_at


def counted_names(executions: Mapping[str, float | None], ends: Mapping[str, float]) -> frozenset[str]:
    """The listed executions that hold a slot."""
    return frozenset(
        name for name, redriven_at in executions.items() if listed_as_running(redriven_at, ends.get(name))
    )


def plan_count(
    listing: RunningListing,
    ends: Mapping[str, float],
    recorded: Iterable[RecordedStart],
    max_concurrency: int,
    now: float,
) -> RunningCount:
    """Count RUNNING from one listing, the ended executions and the recorded starts.

    A listed execution counts unless an event says it ended (and it was not redriven
    since). A listing that stopped paging at MAX but now counts less than MAX (a reused
    read, with more ends known since) says nothing of the executions it didn't page
    through, so the count is MAX: nothing starts until a fresh read.

    Recorded starts: a listed one is counted once, by the list, and its record is kept
    (a later read may omit it again within the lag). One recorded before the stop an
    event reports has ended. One recorded after the listing was asked for can't be in
    it, and counts as it is. Any other one is checked with `DescribeExecution`, oldest
    first. A name recorded twice (a redelivered message) is judged by its newest record,
    which holds the slot longest; the older record goes.
    """
    listed = counted_names(listing.executions, ends)
    if len(listed) >= max_concurrency:
        return RunningCount(len(listed))
    if not listing.complete:
        return RunningCount(max_concurrency)
    newest: dict[str, RecordedStart] = {}
    resolved: list[RecordedStart] = []
    for record in sorted(recorded, key=lambda record: record.recorded_at, reverse=True):
        if record.name in newest or now - record.recorded_at > RECENT_START_WINDOW_SECONDS:
            resolved.append(record)
        else:
            newest[record.name] = record
    unlisted = 0
    to_check: list[RecordedStart] = []
    for name, record in newest.items():
        stopped_at = ends.get(name)
        if name in listed:
            continue
        if stopped_at is not None and record.recorded_at <= stopped_at:
            resolved.append(record)
        elif record.recorded_at > listing.listed_at:
            unlisted += 1
        else:
            to_check.append(record)
    return RunningCount(len(listed) + unlisted, tuple(reversed(to_check)), tuple(resolved))


def still_counts(
    status: str | None, record: RecordedStart, now: float, redrive_count: int | None = None
) -> bool:
    """Whether a recorded start the list doesn't show holds a slot.

    ``status`` and ``redrive_count`` are what `DescribeExecution` said, ``status`` None
    when the execution does not exist (its process may still be about to start it, or
    may have died). A recorded redrive counts like a start until the read shows the
    redrive (a ``redriveCount`` above the one the record was made at): a read that
    still shows the failure it redrives says nothing of the run that follows.
    """
    if record.redrive_count is not None and (redrive_count or 0) <= record.redrive_count:
        status = None
    if status is None:
        return now - record.recorded_at <= RECENT_START_WINDOW_SECONDS
    return status in ACTIVE_STATUSES


def ended_execution(event: object, state_machine_arn: str) -> EndedExecution | None:
    """The execution a status change event says has ended, or None for any other event.

    Only a "Step Functions Execution Status Change" of ``state_machine_arn`` with a
    closed status counts; anything else (another state machine, RUNNING, a malformed
    event) is an ordinary tick. The stop time is ``detail.stopDate``, else the event's
    ``time``; an event with neither is ignored, because without it a redrive after the
    stop could not be told apart.
    """
    try:
        change = StatusChangeEvent.model_validate(event)
    except ValidationError:
        return None
    detail = change.detail
    if detail.state_machine_arn != state_machine_arn or detail.status not in CLOSED_STATUSES:
        return None
    if name_problem(detail.name) is not None:
        return None
    if detail.stop_date is not None:
        stopped_at = detail.stop_date / 1000
    elif change.time is not None:
        stopped_at = change.time.timestamp()
    else:
        return None
    return EndedExecution(name=detail.name, stopped_at=stopped_at)


def describe_trigger(event: object) -> str:
    """A short label for what invoked the tick; unknown shapes are still a tick."""
    if isinstance(event, dict):
        detail_type = event.get("detail-type")
        if isinstance(detail_type, str):
            return detail_type
        return "manual or EventBridge Scheduler"
    return f"unrecognised event of type {type(event).__name__}"
