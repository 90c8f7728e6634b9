"""What one invocation saw and did: the handler's return value, and why admission stopped."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from dispatcher.core.outcomes import Counts, keyed, total_keys, totals
from dispatcher.core.topology import GATE, LANE


class StopReason(StrEnum):
    """Why a tick stopped admitting (the report's ``stopped``)."""

    PAUSED = "paused"
    """The operator paused, or MAX is 0: nothing starts, nothing is lost."""
    BUSY = "busy"
    """Another invocation holds the tick lease; it ticks again for this one."""
    CAPACITY = "capacity"
    """Every slot is taken."""
    DRAINED = "drained"
    """The queue had nothing more to hand out."""
    THROTTLED = "throttled"
    """AWS was still throttling (or failing) after retries, or the DLQ refused a message."""
    TIME = "time"
    """Less Lambda time was left than one round needs."""
    WAITING = "waiting"
    """Everything received has to wait (e.g. a redrive job whose execution no read shows yet)."""


WAITING_STOPS = frozenset({StopReason.CAPACITY, StopReason.THROTTLED, StopReason.WAITING})
"""Stops after which jobs may still wait: a looping invocation ticks again (after a pause)."""


@dataclass(kw_only=True)
class PoolFigures:
    """One pool as a tick counted it."""

    max_concurrency: int
    running: int
    free: int
    limit: int | None = None
    """An adaptive pool's limit L this tick (None: the pool's limit is its MAX)."""
    minimum: int | None = None
    """The lowest L may go, min(min, MAX) (None: not adaptive)."""


@dataclass(kw_only=True)
class GateFigures:
    """One gate as a tick counted it: who was inside, for how long."""

    inside: int
    oldest_inside_seconds: float | None = None


@dataclass(kw_only=True)
class TenantFigures:
    """Message groups as a tick left them, over every member that counts by group."""

    held: int
    """Jobs held for their group's limit (one a group at most)."""
    groups_at_limit: int
    largest_group_share: float | None = None
    """The share of a member's executions that its largest group holds (the largest such share)."""


@dataclass(kw_only=True)
class TickReport:
    """What one invocation saw and did; its dict is the handler's return value.

    The totals are over every member; ``lanes`` and ``pools`` hold each one's own (in the
    return value only when there is more than lane and pool ``default``), ``gates`` each
    gate's. How each outcome is said, per kind of member, is `dispatcher.core.outcomes`.
    """

    running: int = 0
    """RUNNING counted before starting (by the first tick), over every pool."""
    free: int = 0
    stopped: StopReason
    """Why admission ended."""
    ticks: int = 1
    oldest_running_seconds: float | None = None
    """Age of the oldest execution the count saw RUNNING (when the listing was complete)."""
    lanes: dict[str, Counts] = field(default_factory=dict)
    """Lane → what became of its messages."""
    pools: dict[str, PoolFigures] = field(default_factory=dict)
    """Pool → its MAX, RUNNING and free slots (by the first tick)."""
    gates: dict[str, Counts] = field(default_factory=dict)
    """Gate → what became of its requests."""
    inside: dict[str, GateFigures] = field(default_factory=dict)
    """Gate → who was inside (by the first tick; a gate the tick did not count has none)."""
    tenants: TenantFigures | None = None
    """Message groups, when a member counts by group (by the latest tick)."""

    @property
    def laned(self) -> bool:
        """Whether the tick had more than lane and pool ``default``: then each one's figures are reported."""
        return len(self.lanes) > 1 or len(self.pools) > 1 or bool(self.gates)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of member configured: lanes always (lane ``default``), gates when there are any."""
        return (LANE, GATE) if self.gates else (LANE,)

    def members(self) -> list[tuple[str, Counts]]:
        """Each member's kind and counts."""
        return [(LANE, counts) for counts in self.lanes.values()] + [
            (GATE, counts) for counts in self.gates.values()
        ]

    def count_round(self, member: str, counts: Counts) -> None:
        """Count one round of a member (a lane, or a gate)."""
        (self.gates if member in self.gates else self.lanes).setdefault(member, Counts()).update(counts)

    def totals(self) -> dict[str, int]:
        """Every member's counts added up, by the return value's keys."""
        return totals(self.kinds, self.members())

    def as_dict(self) -> dict[str, Any]:
        """The JSON-serialisable return value of the handler."""
        summed = self.totals()
        lane_keys = total_keys((LANE,))
        document: dict[str, Any] = {
            "running": self.running,
            "free": self.free,
            **{key: summed[key] for key in lane_keys},
            "stopped": self.stopped.value,
            "ticks": self.ticks,
            "oldest_running_seconds": self.oldest_running_seconds,
            **{key: value for key, value in summed.items() if key not in lane_keys},
        }
        if self.laned:
            document["lanes"] = {name: keyed(LANE, counts) for name, counts in self.lanes.items()}
            document["pools"] = {
                name: {key: value for key, value in asdict(figures).items() if value is not None}
                for name, figures in self.pools.items()
            }
        if self.tenants is not None:
            document["tenants"] = asdict(self.tenants)
        if self.gates:
            document["gates"] = {name: self._gate(name, counts) for name, counts in self.gates.items()}
        return document

    def _gate(self, name: str, counts: Counts) -> dict[str, Any]:
        """A gate's part of the return value: its counts, and who is inside."""
        return {**keyed(GATE, counts), **(asdict(self.inside[name]) if name in self.inside else {})}

    def add(self, later: TickReport) -> None:
        """Fold in a later tick of the same invocation."""
        for lane, counts in later.lanes.items():
            self.lanes.setdefault(lane, Counts()).update(counts)
        for gate, counts in later.gates.items():
            self.gates.setdefault(gate, Counts()).update(counts)
        self.stopped = later.stopped
        self.tenants = later.tenants or self.tenants
        self.ticks += later.ticks
        if later.oldest_running_seconds is not None:
            self.oldest_running_seconds = later.oldest_running_seconds
