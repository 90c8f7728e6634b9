"""What one tick counted, before it plans: what holds a slot under each count key, and the ends it knows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dispatcher.core.counting import Count
from dispatcher.core.events import EndedExecution
from dispatcher.tick.count import Snapshot


@dataclass(frozen=True)
class Counted:
    """What a tick counted: each count key's count (`Member.count_key`), the ends, the state table's read."""

    counts: Mapping[str, Count]
    """Count key → its count: a lane's state machine's RUNNING, a gate's executions inside."""
    ends: Mapping[str, Sequence[EndedExecution]]
    """State machine ARN → the ends this tick knows (the window's, the event's, `DescribeExecution`'s)."""
    snapshot: Snapshot
    """The tick's read of the state table: the limits for adapting, the cancellations for the screens."""

    @property
    def running(self) -> dict[str, int]:
        """Count key → what holds a slot under it."""
        return {key: count.running for key, count in self.counts.items()}
