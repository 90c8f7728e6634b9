"""What becomes of a received message: one `Outcome` each, counted per member (`Counts`).

How an outcome is reported depends on the kind of member it happened in — a lane
*starts* an execution, a gate *admits* one — and each kind declares its rows
(`dispatcher.core.kinds`). Pure.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum


class Outcome(StrEnum):
    """What became of one received message (or, for ``DELETE_FAILED``, of its delete)."""

    STARTED = "started"
    """Its call took: an execution started (or redriven), or admitted into a gate. It took a slot."""
    REDRIVEN = "redriven"
    """Of ``STARTED``: a closed execution redriven (it runs again)."""
    ALREADY = "already"
    """Its call was made before (a redelivery): the execution exists, or is inside. Deleted."""
    REFUSED = "refused"
    """A gate's request whose task token Step Functions refused: deleted, holding no slot."""
    DEAD_LETTERED = "dead_lettered"
    """It can never start: sent to the member's dead-letter queue with the reason, then deleted."""
    CANCELLED = "cancelled"
    """A lane's job its producer cancelled before it started: deleted, never started."""
    EXPIRED = "expired"
    """A lane's job received after its deadline: dead-lettered with an ``expired:`` reason, never started."""
    WAITING = "waiting"
    """It waits for a later round (no slot, its group's order, a rate, a throttle): shown again."""
    DELETE_FAILED = "delete_failed"
    """Done, but its delete failed: it comes back and is found done again."""

    @property
    def done(self) -> bool:
        """Whether the message leaves its queue (deleted; a dead letter once it is in the DLQ)."""
        return self in DONE


DONE = frozenset(
    {
        Outcome.STARTED,
        Outcome.ALREADY,
        Outcome.REFUSED,
        Outcome.DEAD_LETTERED,
        Outcome.CANCELLED,
        Outcome.EXPIRED,
    }
)
"""Outcomes whose message is deleted from its queue (``REDRIVEN`` is counted in ``STARTED``)."""

Counts = Counter[Outcome]
"""How many messages of some rounds (a member's, or every member's) had each outcome."""
