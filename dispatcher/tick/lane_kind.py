"""The lane's side of the tick: its ports, a counter per state machine, its tenant groups, its rounds."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from dispatcher.core.counting import Count
from dispatcher.core.events import EndedExecution
from dispatcher.core.sizes import Reservation
from dispatcher.core.tenants import Share
from dispatcher.core.topology import Lane, Pool, Topology
from dispatcher.tick.count import Counter, MemberCounter, Snapshot
from dispatcher.tick.groups import GroupBook, LaneRoster
from dispatcher.tick.kind import KindTick, MemberResources, TickParts, Wired
from dispatcher.tick.lane_round import LaneRound
from dispatcher.tick.passes import MemberRounds
from dispatcher.tick.ports import JobQueue, LanePorts, Ports, Roster, StartRate, StartThreads
from dispatcher.tick.reservations import valid
from dispatcher.tick.round import MemberRound


class LaneResources(MemberResources, Protocol):
    """What lanes are wired from beside their queues and state machines."""

    def lane_roster(self, key: str) -> Roster:
        """The state table's rosters of one dispatcher's tenant lanes, keyed by ``key``."""
        ...

    def start_rate(self, lane: str, starts_per_second: float) -> StartRate:
        """Lane ``lane``'s start-rate bucket."""
        ...


def wire_lanes(topology: Topology, resources: LaneResources, wired: Wired) -> tuple[LanePorts, ...]:
    """Every lane's ports: one `StateMachine` per state machine, one roster for them all."""
    roster = resources.lane_roster(wired.key)
    return tuple(
        LanePorts(
            name=lane.name,
            queue=resources.queue(lane.queue_url),
            dead_letters=resources.dead_letters(lane.dead_letter_queue_url),
            roster=roster,
            state_machine=wired.machines[lane.state_machine_arn],
            admissions=wired.machines[lane.state_machine_arn],
            rate=(
                None
                if lane.starts_per_second is None
                else resources.start_rate(lane.name, lane.starts_per_second)
            ),
        )
        for lane in topology.members_of(kind=Lane)
    )


class LaneTick(KindTick):
    """The lanes' side of one container's ticks: their state machines counted, their groups, their rounds."""

    def __init__(self, ports: Ports, parts: TickParts, topology: Topology) -> None:
        super().__init__(ports, parts, topology)
        self._ports = {lane.name: lane for lane in ports.lanes}
        self._rosters: dict[str, LaneRoster] = {}
        """Tenant lane → its roster's reader (what it reconciled is kept across ticks)."""
        self._counters: dict[str, Counter] = {}
        """State machine ARN → its counter (lanes that start one machine count it once)."""
        for lane in topology.members_of(kind=Lane):
            self._counters.setdefault(
                lane.state_machine_arn,
                Counter(
                    self._ports[lane.name].state_machine,
                    parts.records,
                    parts.warm,
                    max_concurrency=topology.pool(lane.pool).max_concurrency,
                    list_reuse_seconds=parts.policy.list_reuse_seconds,
                    clock=parts.runtime.clock,
                ),
            )

    def counters(self, pools: Sequence[Pool]) -> list[MemberCounter]:
        """The pools' lanes' state machines, oldest listing first (never listed first).

        `ListExecutions`' pace is shared by the account's state machines: a tick spends its
        tokens on the listings that are oldest, so every state machine is read in turn
        (not the first ones every tick), and the others count from a reused listing.
        """
        machines = [arn for pool in pools for arn in self.topology.state_machines_of(pool.name)]
        warm = self._parts.warm
        return [
            self._counters[arn]
            for arn in sorted(machines, key=lambda arn: warm.listed_at(arn) or -float("inf"))
        ]

    @property
    def machines(self) -> frozenset[str]:
        """Every lane's state machine."""
        return frozenset(self._counters)

    def steered(self, topology: Topology) -> None:
        """Each state machine's count stops at its pool's live MAX."""
        super().steered(topology)
        for lane in topology.members_of(kind=Lane):
            self._counters[lane.state_machine_arn].max_concurrency = topology.pool(lane.pool).max_concurrency

    def books(
        self,
        counted: frozenset[str],
        snapshot: Snapshot,
        ends: Mapping[str, Sequence[EndedExecution]],
        counts: Mapping[str, Count],
    ) -> Iterator[tuple[str, GroupBook, JobQueue]]:
        """Each tenant lane's groups: its roster, less what ended (the window's, the event's, the count's)."""
        for lane in self.topology.members_of(kind=Lane):
            if not lane.tenants or lane.pool not in counted:
                continue
            ports = self._ports[lane.name]
            roster = self._rosters.setdefault(
                lane.name,
                LaneRoster(
                    lane, ports.state_machine, ports.roster, self._parts.warm, self._parts.runtime.clock
                ),
            )
            arn = lane.state_machine_arn
            book = roster.book(
                Share(lane.max_per_group, lane.fair_share),
                snapshot.windows[arn],
                ends.get(arn, ()),
                counts[arn].ended if arn in counts else None,
            )
            yield lane.name, book, ports.queue

    def rounds(self) -> dict[str, MemberRounds]:
        """Each lane's rounds: its live settings, its groups, the tick's window."""
        return {name: functools.partial(self._round, ports) for name, ports in self._ports.items()}

    def _round(self, ports: LanePorts, threads: StartThreads, snapshot: Snapshot) -> MemberRound:
        return LaneRound(
            ports,
            threads,
            warm=self._parts.warm,
            books=self._parts.books,
            settings=functools.partial(self._lane, ports.name),
            in_window=snapshot.in_window,
            limits=functools.partial(self._limits, ports.name),
            reservation=self._reservation(ports.name, snapshot),
        )

    def _reservation(self, name: str, snapshot: Snapshot) -> Reservation | None:
        """Its pool's reservation, when it is for one of lane ``name``'s jobs and still holds."""
        pool = self._lane(name).pool
        reservation = valid(self.topology, pool, snapshot.reservations.get(pool))
        return reservation if reservation is not None and reservation.lane == name else None

    def _limits(self, name: str) -> list[tuple[int | None, str]]:
        """The limits lane ``name``'s jobs must fit in, as steered now, each with whose it is."""
        lane = self._lane(name)
        return [
            (self.topology.pool(lane.pool).max_concurrency, f"pool {lane.pool}"),
            (lane.max_concurrency, f"lane {lane.name}"),
            (lane.max_per_group, "max_per_group"),
        ]

    def _lane(self, name: str) -> Lane:
        """Lane ``name`` with its live settings (the control parameter's, this tick)."""
        return self.topology.member(name, Lane)
