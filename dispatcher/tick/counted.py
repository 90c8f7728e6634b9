"""What one tick counted, before it plans: every state machine's RUNNING, each gate's inside, their ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dispatcher.core.events import EndedExecution
from dispatcher.tick.count import Count
from dispatcher.tick.gates import GateCounter
from dispatcher.tick.report import GateFigures


@dataclass(frozen=True)
class Counted:
    """What a tick counted: each state machine's RUNNING, who is inside each gate, the gates' counters."""

    counts: Mapping[str, Count]
    """State machine ARN → its count."""
    inside: dict[str, GateFigures]
    """Gate → who is inside."""
    gates: Sequence[GateCounter]
    ends: Mapping[str, Sequence[EndedExecution]]
    """State machine ARN → the ends this tick knows (the window's, the event's, `DescribeExecution`'s)."""
