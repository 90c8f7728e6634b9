"""A kind of member's side of the tick: how its ports are wired, what counts it, its groups, its rounds.

Each kind registers one `TickKind` (`dispatcher.tick.kinds`): the `Ticker` and `wire` ask
every kind in turn, never "is it a gate?". A `KindTick` lives as long as its container's
warm state: its counters are made once, and steered when the operator changes a limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from dispatcher.core.counting import Count
from dispatcher.core.events import EndedExecution, Release
from dispatcher.core.topology import Pool, Topology
from dispatcher.tick.count import MemberCounter, Records, Snapshot
from dispatcher.tick.groups import GroupBook
from dispatcher.tick.passes import MemberRounds
from dispatcher.tick.policy import TickPolicy
from dispatcher.tick.ports import (
    DeadLetters,
    JobQueue,
    MemberPorts,
    Ports,
    Runtime,
    StartThreads,
    StateMachine,
)
from dispatcher.tick.report import TickReport
from dispatcher.tick.round import Round
from dispatcher.tick.warm import WarmState


class MemberResources(Protocol):
    """What every kind's members are wired from: their queues, and their state machines."""

    def queue(self, url: str) -> JobQueue:
        """The FIFO job queue at ``url``."""
        ...

    def dead_letters(self, url: str) -> DeadLetters:
        """The FIFO dead-letter queue at ``url``."""
        ...

    def state_machine(self, arn: str) -> StateMachine:
        """The state machine ``arn``: its executions, and its starts."""
        ...


@dataclass(frozen=True)
class Wired:
    """What a container's members share as they are wired: the records' key, one object a state machine."""

    key: str
    """The key of the dispatcher's records (the default lane's state machine)."""
    machines: Mapping[str, StateMachine]
    """State machine ARN → its one `StateMachine` (lanes that start one machine share it)."""

    def machine(self, arn: str, resources: MemberResources) -> StateMachine:
        """State machine ``arn``'s shared object, or one of its own when no lane starts it."""
        return self.machines.get(arn) or resources.state_machine(arn)


@dataclass(frozen=True)
class TickParts:
    """What every kind's side of one container's ticks works with."""

    policy: TickPolicy
    runtime: Runtime
    warm: WarmState
    records: Records
    """The state table's records, read once a tick."""
    books: Mapping[str, GroupBook]
    """Member → its groups this tick (the same mapping, refilled each tick: `Tenants.books`)."""


class KindTick:
    """One kind's side of one container's ticks. A base: what a kind doesn't do is a no-op here."""

    def __init__(self, ports: Ports, parts: TickParts, topology: Topology) -> None:
        """``topology``: the container's, as first steered (`steered` gives every later one)."""
        self._parts = parts
        self.topology = topology
        """Every pool and member with their live limits, as the latest tick steered them."""

    def left(self, releases: Sequence[Release]) -> None:
        """Free at once the places of executions that say they left one of its members (any invocation)."""

    def counters(self, pools: Sequence[Pool]) -> list[MemberCounter]:
        """What counts its members of ``pools`` this tick, one counter per count key, in counting order."""
        raise NotImplementedError

    @property
    def machines(self) -> frozenset[str]:
        """The state machines whose ends its counters are told about."""
        raise NotImplementedError

    def steered(self, topology: Topology) -> None:
        """Tick from now on within ``topology``'s live limits."""
        self.topology = topology

    def books(
        self,
        counted: frozenset[str],
        snapshot: Snapshot,
        ends: Mapping[str, Sequence[EndedExecution]],
        counts: Mapping[str, Count],
    ) -> Iterator[tuple[str, GroupBook, JobQueue]]:
        """Its tenant members' groups this tick (member, book, its queue), those of the ``counted`` pools."""
        return iter(())

    def rounds(self) -> dict[str, MemberRounds]:
        """Each of its members' rounds, by name."""
        raise NotImplementedError

    def after_spend(
        self, rounds: Round, threads: StartThreads, report: TickReport, stopped: Mapping[str, object]
    ) -> None:
        """What it does once the pools' passes are over (``stopped``: the members that stopped)."""


Resources_contra = TypeVar("Resources_contra", contravariant=True)


@dataclass(frozen=True)
class TickKind(Generic[Resources_contra]):
    """One kind's registration on the tick's side: how its members' ports are made, and its tick."""

    wire: Callable[[Topology, Resources_contra, Wired], tuple[MemberPorts, ...]]
    """Its members' ports (in the topology's order), from the container's resources."""
    tick: Callable[[Ports, TickParts, Topology], KindTick]
    """Its side of one container's ticks."""
