"""Lanes, pools and gates: which queues start or admit which state machines, and which limit each counts in.

``LANES`` is a JSON object ``{"pools": {…}, "lanes": […], "gates": […]}`` (the contract's
"Lanes, pools and gates"). It is validated once, here, into a `Topology`: pool
``default`` (MAX from ``MAX_CONCURRENCY``) and lane ``default`` (the five contract
variables) always exist, so without ``LANES`` the topology is today's one queue and one
state machine. Every error names its field, e.g. ``LANES: lanes[1].queue_url: field
required``, and is a `ConfigurationError`: nothing is received from any queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypeVar, overload

from dispatcher.core.adaptive import Adaptive, LimitState, limit_of
from dispatcher.core.lanes_document import DEFAULT as DEFAULT  # noqa: PLC0414 — re-exported: every module's name for it

LANE = "lane"
"""The primary kind of member (`Member.kind`): the others are registered in `dispatcher.core.kinds`."""


@dataclass(frozen=True)
class Member:
    """What holds a pool's slots: a lane, or a gate.

    Its queue, its dead-letter queue, its state machine, its own ceiling and the operator's
    pause; every member of a pool is counted in it.
    """

    kind: ClassVar[str]
    """What kind of member it is (`LANE`, `GATE`): how its outcomes are said (`dispatcher.core.outcomes`)."""
    name: str
    pool: str
    queue_url: str
    """Its FIFO queue: a lane's jobs, a gate's requests."""
    dead_letter_queue_url: str
    state_machine_arn: str
    """The state machine a lane starts, or whose section a gate guards."""
    max_concurrency: int | None = None
    """The member's own ceiling inside its pool's (None: the pool's alone)."""
    paused: bool = False
    """The operator paused it (a lane receives nothing, a gate admits nothing): its slots go to the others."""
    priority: int = 0
    """Higher first within a pool (the contract gives a gate none: it shares with priority 0)."""
    max_per_group: int | None = None
    """At most this many of one message group's executions hold its slots (None: no group limit)."""
    fair_share: bool = False
    """Free slots go first to the groups holding fewest (a lane's; a gate has none)."""
    max_wait_seconds: int | None = None
    """A lane's job received this long after it was sent expires (None: no bound; a gate has none)."""

    @property
    def tenants(self) -> bool:
        """Whether it counts its executions by message group (a group limit, or fair share)."""
        return self.max_per_group is not None or self.fair_share

    @property
    def count_key(self) -> str:
        """What its RUNNING is counted under: members with one key share one count (`pool_running`)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Lane(Member):
    """A queue whose jobs start executions of one state machine, in one pool."""

    kind: ClassVar[str] = LANE

    starts_per_second: float | None = None
    """At most ``b + r·t`` starts in any t seconds, b = max(1, r) (None: no rate cap)."""

    @property
    def count_key(self) -> str:
        """Its state machine: every RUNNING execution of it counts, whichever lane started it."""
        return self.state_machine_arn


@dataclass(frozen=True)
class Pool:
    """A limit that its lanes share (MAX from the environment for pool ``default``)."""

    name: str
    max_concurrency: int
    paused: bool = False
    """The operator paused the pool: nothing in it starts."""
    adaptive: Adaptive | None = None
    """It learns its limit below MAX from throttle signals (None: its limit is MAX)."""
    limit: int | None = None
    """An adaptive pool's limit L as the tick read it (None: not read; MAX is used)."""
    floor_seconds: float | None = None
    """How long an adaptive pool's L has sat at its lowest, as the tick found it (None: it isn't there)."""

    @property
    def halted(self) -> bool:
        """Nothing may start in it: paused, or MAX is 0."""
        return self.paused or self.max_concurrency == 0

    @property
    def ceiling(self) -> int:
        """What its RUNNING may reach: L for an adaptive pool whose limit was read, else MAX."""
        if self.adaptive is None or self.limit is None:
            return self.max_concurrency
        return limit_of(LimitState(self.limit), self.adaptive, self.max_concurrency)


MemberKind = TypeVar("MemberKind", bound=Member)


@dataclass(frozen=True)
class Topology:
    """Every pool and member of one dispatcher, validated: pool and lane ``default`` come first.

    Its members are one tuple (its lanes in configuration order, then its gates): a
    member's kind is its class, and every question of members takes it (``kind=Lane``).
    """

    pools: tuple[Pool, ...]
    members: tuple[Member, ...]

    @property
    def default_lane(self) -> Lane:
        """The lane of the five contract variables (lane ``default``)."""
        return self.member(DEFAULT, Lane)

    @property
    def default_pool(self) -> Pool:
        """Pool ``default``: its MAX is ``MAX_CONCURRENCY``'s (and the control parameter's top-level keys)."""
        return self.pool(DEFAULT)

    def pool(self, name: str) -> Pool:
        """The pool called ``name``."""
        return next(pool for pool in self.pools if pool.name == name)

    @overload
    def member(self, name: str) -> Member: ...

    @overload
    def member(self, name: str, kind: type[MemberKind]) -> MemberKind: ...

    def member(self, name: str, kind: type[Member] = Member) -> Member:
        """The member (of ``kind``, if given) called ``name`` (`KeyError` when there is none)."""
        for member in self.members:
            if member.name == name and isinstance(member, kind):
                return member
        raise KeyError(name)

    @overload
    def members_of(self, pool: str | None = None) -> tuple[Member, ...]: ...

    @overload
    def members_of(self, pool: str | None, kind: type[MemberKind]) -> tuple[MemberKind, ...]: ...

    @overload
    def members_of(self, pool: str | None = None, *, kind: type[MemberKind]) -> tuple[MemberKind, ...]: ...

    def members_of(self, pool: str | None = None, kind: type[Member] = Member) -> tuple[Member, ...]:
        """The members of ``kind`` (every kind by default) counted in ``pool`` (None: any), in order."""
        return tuple(
            member
            for member in self.members
            if isinstance(member, kind) and (pool is None or member.pool == pool)
        )

    def names(self, kind: type[Member] = Member) -> tuple[str, ...]:
        """The names of the members of ``kind``, in order."""
        return tuple(member.name for member in self.members_of(kind=kind))

    @property
    def watched_machines(self) -> tuple[str, ...]:
        """Every state machine whose ends free a place: the lanes' (the default lane's first), the others'."""
        return tuple(
            dict.fromkeys([*self.state_machines, *(member.state_machine_arn for member in self.members)])
        )

    def state_machines_of(self, pool: str) -> tuple[str, ...]:
        """The distinct state machines whose RUNNING executions count in ``pool``."""
        return tuple(dict.fromkeys(lane.state_machine_arn for lane in self.members_of(pool, Lane)))

    @property
    def state_machines(self) -> tuple[str, ...]:
        """Every distinct state machine, the default lane's first."""
        return tuple(dict.fromkeys(lane.state_machine_arn for lane in self.members_of(kind=Lane)))

    def has_own_counts(self, member: Member) -> bool:
        """Whether no other member counts under ``member``'s key (a lane: starts its state machine)."""
        return sum(1 for other in self.members if other.count_key == member.count_key) == 1
