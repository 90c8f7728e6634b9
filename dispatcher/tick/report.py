"""What one invocation saw and did: the handler's return value, and why admission stopped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from dispatcher.core.adaptive import bounds
from dispatcher.core.counting import Count
from dispatcher.core.kinds import KINDS, PRIMARY, Kind, keyed, kind_of, total_keys, totals
from dispatcher.core.outcomes import Counts
from dispatcher.core.planning import PoolPlan, TickPlan
from dispatcher.core.topology import Topology


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
    floor_seconds: float | None = None
    """How long L has sat at that lowest (None: it isn't there, or the pool doesn't adapt)."""
    reserved: int | None = None
    """Free slots kept idle for a large job's reservation this tick (None: none were)."""


@dataclass(kw_only=True)
class MemberFigures:
    """One member in an invocation: its kind, what became of its messages, and its count."""

    kind: str
    counts: Counts = field(default_factory=Counts)
    count: Count | None = None
    """What held its slots as the first tick counted it (None: not counted)."""


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

    The totals are over every member; ``members`` holds each one's own (a lane's in the
    return value only when there is more than lane and pool ``default``, each other kind's
    always), and ``pools`` each pool's. How each outcome is said, per kind of member, is
    the kind's (`dispatcher.core.kinds`).
    """

    running: int = 0
    """RUNNING counted before starting (by the first tick), over every pool."""
    free: int = 0
    stopped: StopReason
    """Why admission ended."""
    ticks: int = 1
    oldest_running_seconds: float | None = None
    """Age of the oldest execution the count saw RUNNING (when the listing was complete)."""
    members: dict[str, MemberFigures] = field(default_factory=dict)
    """Member → its kind, what became of its messages, and its count (by the first tick)."""
    pools: dict[str, PoolFigures] = field(default_factory=dict)
    """Pool → its MAX, RUNNING and free slots (by the first tick)."""
    tenants: TenantFigures | None = None
    """Message groups, when a member counts by group (by the latest tick)."""

    def of_kind(self, kind: Kind) -> dict[str, MemberFigures]:
        """The members of ``kind``, in the report's order."""
        return {name: figures for name, figures in self.members.items() if figures.kind == kind.name}

    @property
    def laned(self) -> bool:
        """Whether the tick had more than lane and pool ``default``: then each one's figures are reported."""
        primary = sum(1 for figures in self.members.values() if kind_of(figures.kind).primary)
        return primary > 1 or len(self.pools) > 1 or primary < len(self.members)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of member configured: the primary one always (lane ``default``), others when present."""
        present = {figures.kind for figures in self.members.values()}
        return tuple(kind.name for kind in KINDS if kind.primary or kind.name in present)

    def counted(self) -> list[tuple[str, Counts]]:
        """Each member's kind and counts, kind by kind."""
        return [(kind.name, figures.counts) for kind in KINDS for figures in self.of_kind(kind).values()]

    def count_round(self, member: str, counts: Counts) -> None:
        """Count one round of a member (a member the report didn't list is of the primary kind)."""
        self.members.setdefault(member, MemberFigures(kind=PRIMARY.name)).counts.update(counts)

    def totals(self) -> dict[str, int]:
        """Every member's counts added up, by the return value's keys."""
        return totals(self.kinds, self.counted())

    def as_dict(self) -> dict[str, Any]:
        """The JSON-serialisable return value of the handler."""
        summed = self.totals()
        primary_keys = total_keys((PRIMARY.name,))
        document: dict[str, Any] = {
            "running": self.running,
            "free": self.free,
            **{key: summed[key] for key in primary_keys},
            "stopped": self.stopped.value,
            "ticks": self.ticks,
            "oldest_running_seconds": self.oldest_running_seconds,
            **{key: value for key, value in summed.items() if key not in primary_keys},
        }
        if self.laned:
            document[PRIMARY.plural] = self._entries(PRIMARY)
            document["pools"] = {name: _set(figures) for name, figures in self.pools.items()}
        if self.tenants is not None:
            document["tenants"] = asdict(self.tenants)
        for kind in KINDS:
            if not kind.primary and self.of_kind(kind):
                document[kind.plural] = self._entries(kind)
        return document

    def _entries(self, kind: Kind) -> dict[str, dict[str, Any]]:
        """Each member of ``kind``'s part of the return value: its counts, and its kind's of its count."""
        return {
            name: {
                **keyed(kind.name, figures.counts),
                **({} if figures.count is None else kind.entry(figures.count)),
            }
            for name, figures in self.of_kind(kind).items()
        }

    def add(self, later: TickReport) -> None:
        """Fold in a later tick of the same invocation."""
        for name, figures in later.members.items():
            self.members.setdefault(name, MemberFigures(kind=figures.kind)).counts.update(figures.counts)
        self.stopped = later.stopped
        self.tenants = later.tenants or self.tenants
        self.ticks += later.ticks
        if later.oldest_running_seconds is not None:
            self.oldest_running_seconds = later.oldest_running_seconds


def _set(figures: PoolFigures) -> dict[str, Any]:
    """A pool's figures that are set (an L and its lowest only when it adapts)."""
    return {key: value for key, value in asdict(figures).items() if value is not None}


def stopped_report(topology: Topology, reason: StopReason) -> TickReport:
    """The report of a tick that stopped before counting: the members its kinds always list, at 0."""
    return TickReport(
        stopped=reason,
        members={
            member.name: MemberFigures(kind=member.kind)
            for member in topology.members
            if not kind_of(member.kind).primary
        },
    )


def counted_report(topology: Topology, plan: TickPlan, counts: Mapping[str, Count]) -> TickReport:
    """A tick's report as it begins spending: what it counted (``counts``, by count key), every member at 0.

    Its oldest RUNNING is the primary kind's (a lane's state machine's); another kind shows
    the age of its own in its members' entries.
    """
    primary = {member.count_key for member in topology.members if kind_of(member.kind).primary}
    ages = [count.oldest_seconds for key, count in counts.items() if key in primary]
    return TickReport(
        running=sum(count.running for count in counts.values()),
        free=plan.free,
        stopped=StopReason.CAPACITY,
        oldest_running_seconds=max((age for age in ages if age is not None), default=None),
        members={
            member.name: MemberFigures(kind=member.kind, count=counts.get(member.count_key))
            for member in topology.members
        },
        pools={pool.pool.name: _pool_figures(pool) for pool in plan.pools},
    )


def _pool_figures(planned: PoolPlan) -> PoolFigures:
    """A pool as the tick counted it: its MAX, RUNNING and free slots, and its L and lowest L if it adapts."""
    pool = planned.pool
    return PoolFigures(
        max_concurrency=pool.max_concurrency,
        running=planned.running,
        free=planned.free,
        limit=None if pool.adaptive is None else pool.ceiling,
        minimum=None if pool.adaptive is None else bounds(pool.adaptive, pool.max_concurrency)[0],
        floor_seconds=None if pool.adaptive is None else pool.floor_seconds,
    )
