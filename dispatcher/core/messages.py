"""The message contract: what a job on the queue looks like, and the rules it must follow.

The dispatcher applies these rules on receipt (a message that breaks one is dead-lettered
with the reason), and the producer client and the CLI apply the same ones before sending.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dispatcher.core.executions import input_problem, name_problem

EXECUTION_NAME_ATTRIBUTE = "ExecutionName"
"""Optional String attribute: the execution's name (else the SQS MessageId)."""
DISPATCH_ACTION_ATTRIBUTE = "DispatchAction"
"""Optional String attribute: ``start`` (the default) or ``redrive``."""
REDRIVE_COUNT_ATTRIBUTE = "RedriveCount"
"""With ``DispatchAction`` ``redrive``: the execution's ``redriveCount`` when the redrive was asked for."""
DISPATCH_ERROR_ATTRIBUTE = "DispatchError"
"""The String attribute of a dead-letter copy: why the message can never start."""
START_BY_ATTRIBUTE = "StartBy"
"""Optional String attribute: the moment (ISO 8601 with a UTC offset) after which the job must not start."""
SLOTS_ATTRIBUTE = "Slots"
"""Optional String or Number attribute: the pool's slots the job takes (an integer >= 1; absent: 1)."""
START_ACTION = "start"
REDRIVE_ACTION = "redrive"

MAX_GROUP_ID_LENGTH = 128
DISPATCH_ERROR_MAX_LENGTH = 512
SQS_MAX_MESSAGE_BYTES = 1_048_576
SQS_MAX_MESSAGE_ATTRIBUTES = 10
DEAD_LETTER_HEADROOM_BYTES = 4096
"""The source queue's MaximumMessageSize is this much below the DLQ's, so a dead-letter
copy (the source message plus a DispatchError of at most 512 characters, 4 bytes each in
UTF-8, and the attribute's name and type) always fits."""


class QueuedMessage(BaseModel):
    """One job received from the source FIFO queue."""

    model_config = ConfigDict(frozen=True)

    message_id: str
    receipt_handle: str
    body: str
    group_id: str
    execution_name: str | None = Field(
        default=None, description="The optional `ExecutionName` String attribute."
    )
    execution_name_type: str | None = Field(
        default=None, description="DataType of the `ExecutionName` attribute, when present."
    )
    receive_count: int = 1
    sent_at: float | None = Field(
        default=None, description="When SQS received the message (its SentTimestamp), epoch seconds."
    )
    attributes: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Message attributes as SQS returned them, copied to the DLQ.",
    )


def start_by_problem(text: str, now: float | None = None) -> str | None:
    """What is wrong with a ``StartBy`` value (None: nothing); with ``now``, one that has passed is."""
    try:
        at = parse_start_by(text)
    except ValueError as error:
        return str(error)
    if now is not None and at <= now:
        return (
            f"{START_BY_ATTRIBUTE} {text} has passed: the job would expire unstarted;"
            " give a moment in the future"
        )
    return None


def parse_start_by(text: str) -> float:
    """A ``StartBy`` value as epoch seconds; raises ``ValueError`` naming what it must be."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ValueError(
            f"{START_BY_ATTRIBUTE} must be an ISO 8601 moment with a UTC offset"
            f" (e.g. 2026-11-27T10:00:00Z), not {text!r}"
        )
    return moment.timestamp()


def slots_problem(value: object) -> str | None:
    """What is wrong with a job's size (None: nothing): it must be an integer >= 1 (a boolean is not)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"{SLOTS_ATTRIBUTE} must be an integer >= 1, not {value!r}"
    return None


def parse_slots(attribute: dict[str, str] | None) -> int:
    """A job's size from its ``Slots`` attribute as SQS returned it (absent: 1).

    Raises ValueError naming ``Slots`` for anything but a String or Number that is an
    integer >= 1 (``"2"``, ``"2.0"`` is not: a size is whole).
    """
    if attribute is None:
        return 1
    data_type = attribute.get("DataType", "")
    if not data_type.startswith(("String", "Number")):
        raise ValueError(f"{SLOTS_ATTRIBUTE} attribute must be of type String or Number, not {data_type}")
    text = attribute.get("StringValue", "").strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValueError(f"{SLOTS_ATTRIBUTE} must be an integer >= 1, not {attribute.get('StringValue')!r}")
    return int(text)


def size_of(message: QueuedMessage) -> int:
    """A received job's size (its ``Slots``; 1 when absent or malformed: a malformed one is poison)."""
    try:
        return parse_slots(message.attributes.get(SLOTS_ATTRIBUTE))
    except ValueError:
        return 1


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


def deduplication_id(name: str, body: str, redrive_count: int | None = None) -> str:
    """The ``MessageDeduplicationId`` of a named job: the same for a re-send, another for another input.

    SQS drops a message whose deduplication id it saw in the last five minutes, so an id
    made of the name alone would drop a *different* job sent under the same name: the
    dispatcher could never dead-letter it as a name collision (invariant 3), and it would
    be lost without a trace. Hashing the name with the body keeps a retry one job and
    lets a different input reach the queue. A hex digest is also always a valid id
    (names may hold characters SQS refuses in one).
    """
    # No valid name or JSON text holds a NUL: it separates the parts unambiguously. The
    # producers page gives this formula to senders that use plain boto3.
    parts = [name, body] if redrive_count is None else [name, body, str(redrive_count)]
    return hashlib.sha256("\0".join(parts).encode("utf-8", errors="surrogatepass")).hexdigest()


def job_body(value: object) -> str:
    """A job's body from what a caller has: JSON text as given (verbatim), else the value as JSON.

    Raises ``TypeError`` naming what a body may be when the value can't be JSON.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as error:
            raise TypeError(f"a job's body in bytes must be UTF-8 JSON text: {error.reason}") from error
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise TypeError(
            "a job's body is JSON text (str) or a value json.dumps can write (dict, list, number,"
            f" bool, None), not {type(value).__name__}: {error}"
        ) from error


def dispatch_error(reason: str) -> str:
    """A `DispatchError` attribute value: bounded, so the DLQ copy still fits in SQS."""
    if len(reason) <= DISPATCH_ERROR_MAX_LENGTH:
        return reason
    return reason[: DISPATCH_ERROR_MAX_LENGTH - 1] + "…"


def dead_letter_attributes(source: dict[str, dict[str, str]], reason: str) -> dict[str, dict[str, str]]:
    """The attributes of a DLQ copy: the source's String/Number ones, then the reason.

    SQS allows ten attributes per message, so when the source has more, the reason
    attribute takes the place of the last copied one (``ExecutionName`` is kept before
    any other), and the reason names every attribute left out (binary values aren't
    copied either).
    """
    copyable = sorted(
        (
            name
            for name, value in source.items()
            if name != DISPATCH_ERROR_ATTRIBUTE and "StringValue" in value
        ),
        key=lambda name: (name != EXECUTION_NAME_ATTRIBUTE, name),
    )
    kept = copyable[: SQS_MAX_MESSAGE_ATTRIBUTES - 1]
    left_out = sorted(set(source) - set(kept) - {DISPATCH_ERROR_ATTRIBUTE})
    if left_out:
        reason = f"{reason} (attributes not copied: {', '.join(left_out)})"
    attributes = {name: dict(source[name]) for name in kept}
    attributes[DISPATCH_ERROR_ATTRIBUTE] = {"DataType": "String", "StringValue": dispatch_error(reason)}
    return attributes


@dataclass(frozen=True)
class Job:
    """One job: the execution input (JSON text, or a value such as a dict), its group, optionally its name."""

    body: str
    """The execution input, sent verbatim. Given a dict (or another JSON value), its JSON text."""
    group: str
    name: str | None = None
    """The execution name; without one, the message's SQS MessageId becomes the name."""
    deduplication_id: str | None = None
    """Explicit; by default derived from the name and the body (`message_deduplication_id`)."""
    redrive_count: int | None = None
    """Set: not a new start but "redrive execution ``name``", whose ``redriveCount`` is this now."""
    start_by: str | None = None
    """The job's deadline to start by (its ``StartBy`` attribute: ISO 8601 with a UTC offset)."""
    slots: int | None = None
    """How many of its pool's slots it takes (its ``Slots`` attribute; None: 1, no attribute)."""
    body_problem: str | None = field(default=None, init=False, repr=False, compare=False)
    """Why the body given can't be JSON (then it is not sent)."""

    def __post_init__(self) -> None:
        # Callers mostly hold a dict: take it as its JSON text rather than fail on it later.
        if not isinstance(self.body, str):
            try:
                object.__setattr__(self, "body", job_body(self.body))
            except TypeError as error:
                object.__setattr__(self, "body_problem", str(error))

    def problem(self, now: float | None = None) -> str | None:
        """Why the dispatcher would never start this job, or None.

        ``now``: when it is sent; a ``StartBy`` not after it has passed (it would expire).
        """
        if self.body_problem is not None:
            return self.body_problem
        if self.redrive_count is not None and (self.name is None or self.redrive_count < 0):
            return "a redrive job needs the execution's name and its redriveCount (>= 0)"
        if self.start_by is not None:
            problem = start_by_problem(self.start_by, now)
            if problem is not None:
                return problem
        if self.slots is not None:
            problem = slots_problem(self.slots)
            if problem is not None:
                return problem
        return job_problem(self.body, self.group, self.name)

    def message_deduplication_id(self) -> str | None:
        """The explicit id, else one derived from the name and the body; None for a job without a name."""
        if self.deduplication_id is not None:
            return self.deduplication_id
        if self.name is None:
            return None
        return deduplication_id(self.name, self.body, self.redrive_count)

    def attributes(self) -> dict[str, dict[str, str]]:
        """The message attributes that carry the name and, for a redrive, the action."""
        attributes: dict[str, dict[str, str]] = {}
        if self.name is not None:
            attributes[EXECUTION_NAME_ATTRIBUTE] = {"DataType": "String", "StringValue": self.name}
        if self.start_by is not None:
            attributes[START_BY_ATTRIBUTE] = {"DataType": "String", "StringValue": self.start_by}
        if self.slots is not None:
            attributes[SLOTS_ATTRIBUTE] = {"DataType": "Number", "StringValue": str(self.slots)}
        if self.redrive_count is not None:
            attributes[DISPATCH_ACTION_ATTRIBUTE] = {"DataType": "String", "StringValue": REDRIVE_ACTION}
            attributes[REDRIVE_COUNT_ATTRIBUTE] = {
                "DataType": "Number",
                "StringValue": str(self.redrive_count),
            }
        return attributes

    def payload_bytes(self) -> int:
        """What the job counts towards a batch's payload limit."""
        attributes = sum(
            len(key) + len(value["DataType"]) + len(value["StringValue"].encode())
            for key, value in self.attributes().items()
        )
        return len(self.body.encode("utf-8", errors="replace")) + attributes


@dataclass(eq=False)
class Held:
    """A message this command received and holds (hidden from others) until it deletes or releases it."""

    message_id: str
    receipt_handle: str
    body: str
    hidden_until: float
    attributes: dict[str, Any] = field(default_factory=dict)
    system: dict[str, str] = field(default_factory=dict)
