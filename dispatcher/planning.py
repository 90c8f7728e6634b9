"""Pure decisions of one tick: capacity, names, validation, ordering.

Nothing here performs I/O or reads a clock; time arrives as ``now`` (epoch seconds).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from dispatcher.models import ListedRunning, QueuedMessage, RecordedStart

MAX_INPUT_BYTES = 262_144
MAX_NAME_LENGTH = 80
SQS_MAX_RECEIVE = 10
# ListExecutions may omit an execution for up to 60 s after it started; a start
# recorded by a process that died before StartExecution must not hold a slot for
# longer than this, so the window is the lag plus a margin for the start call itself.
RECENT_START_WINDOW_SECONDS = 90.0
FORBIDDEN_NAME_CHARACTERS = frozenset('<>{}[]?*"#%\\^|~`$&,;:/')
ACTIVE_STATUSES = frozenset({"RUNNING", "PENDING_REDRIVE"})
DISPATCH_ERROR_MAX_LENGTH = 512
SQS_MAX_MESSAGE_BYTES = 1_048_576
SQS_MAX_MESSAGE_ATTRIBUTES = 10
# The source queue's MaximumMessageSize is this much below the DLQ's, so a dead-letter
# copy (the source message plus a DispatchError of at most 512 characters, 4 bytes
# each in UTF-8, and the attribute's name and type) always fits.
DEAD_LETTER_HEADROOM_BYTES = 4096


def free_slots(max_concurrency: int, running: int) -> int:
    """Executions the dispatcher may start now: never negative."""
    return max(0, max_concurrency - running)


def receive_size(free: int) -> int:
    """How many messages one `ReceiveMessage` asks for (SQS returns 10 at most)."""
    return max(0, min(SQS_MAX_RECEIVE, free))


def listing_page_size(max_concurrency: int, counted: int) -> int:
    """`maxResults` for the next `ListExecutions` page: stop paging once MAX is reached."""
    return max(1, min(1000, max_concurrency - counted))


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


@dataclass(frozen=True)
class Start:
    """Start an execution with this name and the message body as input."""

    message: QueuedMessage
    name: str


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
    return Start(message, name)


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
class RecentStartsReview:
    """How recorded starts relate to what `ListExecutions` showed."""

    resolved: tuple[RecordedStart, ...]
    """Records that can go: too old to matter, or superseded by a newer record of the name."""
    to_check: tuple[RecordedStart, ...]
    """Not listed: `DescribeExecution` tells whether they still run."""


def review_recent_starts(
    recorded: Iterable[RecordedStart], listed: ListedRunning, now: float
) -> RecentStartsReview:
    """Split recorded starts into those that can go and those to check.

    Only called when the list was read completely. A listed start is counted by the
    list, and its record is kept: `ListExecutions` is eventually consistent, and a later
    read may omit it again while it is younger than the lag. One name recorded twice (a
    redelivered message) is judged by its newest record, which holds the slot longest.
    """
    newest: dict[str, RecordedStart] = {}
    resolved: list[RecordedStart] = []
    for record in sorted(recorded, key=lambda record: record.recorded_at, reverse=True):
        if record.name in newest or now - record.recorded_at > RECENT_START_WINDOW_SECONDS:
            resolved.append(record)
        else:
            newest[record.name] = record
    to_check = [record for name, record in newest.items() if name not in listed.names]
    return RecentStartsReview(tuple(resolved), tuple(reversed(to_check)))


def still_counts(status: str | None, record: RecordedStart, now: float) -> bool:
    """Whether a recorded start the list doesn't show holds a slot.

    ``status`` is what `DescribeExecution` said, or None when the execution does not
    exist (its process may still be about to start it, or may have died).
    """
    if status is None:
        return now - record.recorded_at <= RECENT_START_WINDOW_SECONDS
    return status in ACTIVE_STATUSES


def describe_trigger(event: object) -> str:
    """A short label for what invoked the tick; unknown shapes are still a tick."""
    if isinstance(event, dict):
        detail_type = event.get("detail-type")
        if isinstance(detail_type, str):
            return detail_type
        return "manual or EventBridge Scheduler"
    return f"unrecognised event of type {type(event).__name__}"
