"""Lanes, pools and gates: which queues start or admit which state machines, and which limit each counts in.

``LANES`` is a JSON object ``{"pools": {…}, "lanes": […], "gates": […]}`` (the contract's
"Lanes, pools and gates"). It is validated once, here, into a `Topology`: pool
``default`` (MAX from ``MAX_CONCURRENCY``) and lane ``default`` (the five contract
variables) always exist, so without ``LANES`` the topology is today's one queue and one
state machine. Every error names its field, e.g. ``LANES: lanes[1].queue_url: field
required``, and is a `ConfigurationError`: nothing is received from any queue.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, overload
from urllib.parse import urlsplit

from pydantic import ValidationError

from dispatcher.core.adaptive import Adaptive, AdaptiveDocument, LimitState, limit_of
from dispatcher.core.errors import ConfigurationError, field_problem, message_of
from dispatcher.core.lanes_document import DEFAULT as DEFAULT  # noqa: PLC0414 — re-exported: every module's name for it
from dispatcher.core.lanes_document import DefaultPoolDocument, GateDocument, LaneDocument, LanesDocument

LANE, GATE = "lane", "gate"
"""The kinds of member (`Member.kind`)."""


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
class Gate(Member):
    """A section of one state machine's workflow that executions enter with a task token, in one pool.

    Its executions inside the section count in its pool; those waiting at it, or past it,
    count nowhere. It shares its pool's slots with the pool's lanes of priority 0. Its
    queue takes requests (a ``{"token", "execution"}`` each).
    """

    kind: ClassVar[str] = GATE

    @property
    def count_key(self) -> str:
        """Its own roster: the executions inside its section (its state machine's others count nowhere)."""
        return f"gate:{self.name}"


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
        """Every state machine whose ends free a place: the lanes' (the default lane's first), the gates'."""
        gates = (gate.state_machine_arn for gate in self.members_of(kind=Gate))
        return tuple(dict.fromkeys([*self.state_machines, *gates]))

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


def parse_lanes(text: str | None, default: Lane, default_max: int) -> Topology:
    """``LANES`` (None or blank: absent) with the environment's lane and MAX, as a `Topology`.

    Raises a `ConfigurationError` naming the field: ``LANES: <field>: <what is wrong>``.
    """
    document, default_pool = _document(text)
    _check_names(document)
    _check_fifo(document)
    pools = [Pool(DEFAULT, default_max, adaptive=_settings(default_pool.adaptive))]
    pools += [
        Pool(name, pool.max_concurrency, adaptive=_settings(pool.adaptive))
        for name, pool in document.pools.items()
    ]
    lanes = [default]
    lanes += [
        Lane(
            name=lane.name,
            pool=lane.pool,
            queue_url=lane.queue_url,
            dead_letter_queue_url=lane.dead_letter_queue_url,
            state_machine_arn=lane.state_machine_arn,
            priority=lane.priority,
            max_concurrency=lane.max_concurrency,
            starts_per_second=lane.starts_per_second,
            max_per_group=lane.max_per_group,
            fair_share=lane.fair_share,
            max_wait_seconds=lane.max_wait_seconds,
        )
        for lane in document.lanes
    ]
    _check_state_machines(lanes)
    gates = tuple(
        Gate(
            name=gate.name,
            pool=gate.pool,
            queue_url=gate.queue_url,
            dead_letter_queue_url=gate.dead_letter_queue_url,
            state_machine_arn=gate.state_machine_arn,
            max_concurrency=gate.max_concurrency,
            max_per_group=gate.max_per_group,
        )
        for gate in document.gates
    )
    _check_gates(lanes, gates)
    return Topology(pools=tuple(pools), members=(*lanes, *gates))


def _settings(document: AdaptiveDocument | None) -> Adaptive | None:
    return None if document is None else document.settings()


def _document(text: str | None) -> tuple[LanesDocument, DefaultPoolDocument]:
    """The document, and ``pools.default`` read apart (it may set only ``adaptive``)."""
    if text is None or not text.strip():
        return LanesDocument(), DefaultPoolDocument()
    try:
        value: Any = json.loads(text)
    except ValueError as error:
        raise ConfigurationError(f"LANES: not JSON: {error}") from error
    if not isinstance(value, dict):
        raise ConfigurationError('LANES: must be a JSON object like {"pools": {}, "lanes": []}')
    pools, default = value.get("pools"), {}
    if isinstance(pools, dict) and DEFAULT in pools:
        default = pools[DEFAULT]
        value = {**value, "pools": {name: pool for name, pool in pools.items() if name != DEFAULT}}
        if isinstance(default, dict) and "max_concurrency" in default:
            raise ConfigurationError(
                "LANES: pools.default: pool default is the environment's; its MAX is MAX_CONCURRENCY"
                " (pools.default takes only adaptive)"
            )
    try:
        return LanesDocument.model_validate(value), _default_pool(default)
    except ValidationError as error:
        found = "; ".join(field_problem(issue["loc"], message_of(issue)) for issue in error.errors())
        raise ConfigurationError(f"LANES: {found}") from error


def _default_pool(document: Any) -> DefaultPoolDocument:
    """``pools.default``, its problems located there (``pools.default.adaptive.min``)."""
    try:
        return DefaultPoolDocument.model_validate(document)
    except ValidationError as error:
        found = "; ".join(
            field_problem(("pools", DEFAULT, *issue["loc"]), message_of(issue)) for issue in error.errors()
        )
        raise ConfigurationError(f"LANES: {found}") from error


def _check_names(document: LanesDocument) -> None:
    seen: dict[str, str] = {}
    members = [(f"lanes[{index}]", lane.name, lane.pool) for index, lane in enumerate(document.lanes)]
    members += [(f"gates[{index}]", gate.name, gate.pool) for index, gate in enumerate(document.gates)]
    for where, name, pool in members:
        if name == DEFAULT:
            raise ConfigurationError(f"LANES: {where}.name: default is the environment's lane")
        if name in seen:
            raise ConfigurationError(f"LANES: {where}.name: {name!r} is already the name of {seen[name]}")
        seen[name] = where
        if pool != DEFAULT and pool not in document.pools:
            raise ConfigurationError(f"LANES: {where}.pool: unknown pool {pool!r}")


def is_fifo_queue_url(url: str) -> bool:
    """Whether ``url`` is a FIFO queue's (SQS names every FIFO queue ``….fifo``, and only those)."""
    return urlsplit(url).path.rstrip("/").endswith(".fifo")


def _check_fifo(document: LanesDocument) -> None:
    """Every lane's and gate's queues are FIFO: a standard one would silently lose order and deduplication."""
    members: list[tuple[str, LaneDocument | GateDocument]] = [
        (f"lanes[{index}]", lane) for index, lane in enumerate(document.lanes)
    ]
    members += [(f"gates[{index}]", gate) for index, gate in enumerate(document.gates)]
    for where, member in members:
        for field, url in (
            ("queue_url", member.queue_url),
            ("dead_letter_queue_url", member.dead_letter_queue_url),
        ):
            if not is_fifo_queue_url(url):
                raise ConfigurationError(
                    f"LANES: {where}.{field}: {url} is not a FIFO queue (its name would end in .fifo):"
                    " a standard queue keeps no order within a group and no deduplication"
                )


def _check_state_machines(lanes: Sequence[Lane]) -> None:
    """A state machine counts in one pool, and a lane's own MAX needs a state machine of its own."""
    first: dict[str, int] = {}
    for index, lane in enumerate(lanes):
        where = f"lanes[{index - 1}]"
        owner = first.setdefault(lane.state_machine_arn, index)
        if owner == index:
            continue
        other = lanes[owner]
        other_name = "the environment's lane" if owner == 0 else f"lanes[{owner - 1}]"
        if other.pool != lane.pool:
            raise ConfigurationError(
                f"LANES: {where}.pool: its state machine is {other_name}'s too, in pool {other.pool!r}:"
                " lanes that start one state machine must name the same pool"
            )
    for index, lane in enumerate(lanes[1:]):
        shared = sum(1 for other in lanes if other.state_machine_arn == lane.state_machine_arn) > 1
        if lane.max_concurrency is not None and shared:
            raise ConfigurationError(
                f"LANES: lanes[{index}].max_concurrency: another lane starts the same state machine,"
                " so this lane's RUNNING can't be told apart (use a pool, or a state machine of its own)"
            )


def _check_gates(lanes: Sequence[Lane], gates: Sequence[Gate]) -> None:
    """A state machine can't be both a lane's and a gate's in one pool.

    A lane counts every RUNNING execution of its state machine, those waiting at the gate
    too: the gate's executions would hold its pool's slots twice, and the waiting ones
    would hold slots they wait for.
    """
    for index, gate in enumerate(gates):
        for lane_index, lane in enumerate(lanes):
            if lane.state_machine_arn == gate.state_machine_arn and lane.pool == gate.pool:
                owner = "the environment's lane" if lane_index == 0 else f"lanes[{lane_index - 1}]"
                raise ConfigurationError(
                    f"LANES: gates[{index}].state_machine_arn: it is {owner}'s state machine too, in pool"
                    f" {gate.pool!r}: a state machine can't be both a lane's and a gate's in one pool"
                )
