"""Dead letters going back to the job queue: how each one moves, and the reasons they were dead-lettered.

Dead letters go back unchanged but for their ``DispatchError``, one message group in
send order, with a deduplication id that makes the move idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dispatcher.core.messages import (
    DISPATCH_ERROR_ATTRIBUTE,
    EXECUTION_NAME_ATTRIBUTE,
    START_BY_ATTRIBUTE,
    Held,
)
from dispatcher.core.rerun import iso

DROPPED_ON_MOVE = frozenset({DISPATCH_ERROR_ATTRIBUTE, START_BY_ATTRIBUTE})
"""Attributes a moved dead letter loses: why it was dead-lettered, and a deadline (a redriven
expired job is one the operator wants to run)."""


@dataclass(frozen=True)
class DeadLetterMove:
    """How one dead letter goes back to the job queue."""

    held: Held
    group: str
    attributes: dict[str, dict[str, str]]
    deduplication_id: str
    reason: str | None

    def as_json(self) -> dict[str, Any]:
        """The dead letter for ``--json``: ``dead_lettered_at`` is when the DLQ copy was sent."""
        name = self.attributes.get(EXECUTION_NAME_ATTRIBUTE, {}).get("StringValue")
        return {
            "message_id": self.held.message_id,
            "group": self.group,
            "name": name,
            "reason": self.reason,
            "kind": reason_kind(self.reason),
            "dead_lettered_at": iso(float(self.held.system.get("SentTimestamp", 0)) / 1000),
            "body": self.held.body,
        }


def plan_move(held: Held) -> DeadLetterMove:
    """The job-queue copy of a dead letter: its body, group and attributes but ``DispatchError``, ``StartBy``.

    The deduplication id is the id of the job-queue message that was dead-lettered
    (the DLQ copy's own deduplication id, by the dispatcher's contract; a message SQS
    moved itself keeps its MessageId), so moving twice within SQS's five minutes sends
    once. A message without ``ExecutionName`` gets that same id as its name, the name
    it would have started under, so even a later duplicate never starts twice.
    """
    reason_value = held.attributes.get(DISPATCH_ERROR_ATTRIBUTE)
    reason = None if reason_value is None else str(reason_value.get("StringValue", ""))
    original = held.system.get("MessageDeduplicationId") if reason is not None else None
    original = original or held.message_id
    attributes: dict[str, dict[str, str]] = {}
    for key, value in held.attributes.items():
        if key in DROPPED_ON_MOVE or "StringValue" not in value:
            continue
        attributes[key] = {"DataType": str(value["DataType"]), "StringValue": str(value["StringValue"])}
    attributes.setdefault(EXECUTION_NAME_ATTRIBUTE, {"DataType": "String", "StringValue": original})
    return DeadLetterMove(
        held=held,
        group=held.system.get("MessageGroupId", ""),
        attributes=attributes,
        deduplication_id=original,
        reason=reason,
    )


KIND_LENGTH = 60
MOVED_BY_SQS = "(moved by SQS: maxReceiveCount)"
"""What a dead letter without a ``DispatchError`` is: SQS's redrive policy moved it."""


def reason_kind(reason: str | None) -> str:
    """A reason without its particulars: ``expired``, ``name collision``, ``input is not valid JSON``.

    A ``DispatchError`` reads ``kind: particulars`` (``expired: deadline … passed``).
    """
    if reason is None:
        return MOVED_BY_SQS
    kind = reason.split(":", 1)[0].split(" (", 1)[0].strip() or reason
    return kind if len(kind) <= KIND_LENGTH else f"{kind[: KIND_LENGTH - 1]}…"


def reasons(moves: Iterable[DeadLetterMove]) -> dict[str, int]:
    """How many dead letters of each kind of reason (`reason_kind`), most first."""
    found: dict[str, int] = {}
    for move in moves:
        key = reason_kind(move.reason)
        found[key] = found.get(key, 0) + 1
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))
