"""The gate's side of the tick: its ports, who is inside each gate, its groups, its rounds, its probes."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from dispatcher.core.counting import Count
from dispatcher.core.events import EndedExecution, Release
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.rosters import group_counts
from dispatcher.core.tenants import Share
from dispatcher.core.topology import Pool, Topology
from dispatcher.telemetry import logger
from dispatcher.tick.count import MemberCounter, Snapshot
from dispatcher.tick.gate_ports import GatePorts, GateRoster, TaskTokens
from dispatcher.tick.gate_releases import release
from dispatcher.tick.gates import GateCounter, GateRound
from dispatcher.tick.groups import GroupBook
from dispatcher.tick.kind import KindTick, MemberResources, TickParts, Wired
from dispatcher.tick.passes import MemberRounds
from dispatcher.tick.ports import JobQueue, Ports, StartThreads
from dispatcher.tick.report import TickReport
from dispatcher.tick.round import MemberRound, Round


class GateResources(MemberResources, Protocol):
    """What gates are wired from beside their queues and state machines."""

    def gate_roster(self, key: str) -> GateRoster:
        """The state table's rosters of one dispatcher's gates, keyed by ``key``."""
        ...

    def task_tokens(self) -> TaskTokens:
        """`SendTaskSuccess`, for the gates."""
        ...


def wire_gates(topology: Topology, resources: GateResources, wired: Wired) -> tuple[GatePorts, ...]:
    """Every gate's ports: its state machine (the lanes' object, if one starts it), one roster for all."""
    roster = resources.gate_roster(wired.key)
    return tuple(
        GatePorts(
            name=gate.name,
            queue=resources.queue(gate.queue_url),
            dead_letters=resources.dead_letters(gate.dead_letter_queue_url),
            roster=roster,
            state_machine=wired.machine(gate.state_machine_arn, resources),
            tokens=resources.task_tokens(),
            admissions=roster,
        )
        for gate in topology.members_of(kind=Gate)
    )


class GateTick(KindTick):
    """The gates' side of one container's ticks: who is inside each, their groups, rounds and probes."""

    def __init__(self, ports: Ports, parts: TickParts, topology: Topology) -> None:
        super().__init__(ports, parts, topology)
        self._ports = ports
        self._counters = {
            gate.name: GateCounter(
                topology.member(gate.name, Gate), gate, gate.admissions, parts.warm, parts.runtime.clock
            )
            for gate in ports.of_kind(GatePorts)
        }
        """Gate name → its counter (who is inside, for its rounds too)."""
        self._counted: list[GateCounter] = []
        """The counters of this tick's pools."""

    def left(self, releases: Sequence[Release]) -> None:
        """Free the places of the executions that say they left a gate (`release`)."""
        release(releases, self.topology, self._ports, self._parts.runtime)

    def counters(self, pools: Sequence[Pool]) -> list[MemberCounter]:
        """The pools' gates, in order."""
        self._counted = [
            self._counters[gate.name] for pool in pools for gate in self.topology.members_of(pool.name, Gate)
        ]
        return list(self._counted)

    @property
    def machines(self) -> frozenset[str]:
        """Every gate's state machine."""
        return frozenset(counter.state_machine_arn for counter in self._counters.values())

    def books(
        self,
        counted: frozenset[str],
        snapshot: Snapshot,
        ends: Mapping[str, Sequence[EndedExecution]],
        counts: Mapping[str, Count],
    ) -> Iterator[tuple[str, GroupBook, JobQueue]]:
        """Each counted gate's groups with a limit: who is inside, and its held requests."""
        counted_gates = {counter.name: counter for counter in self._counted}
        for gate in self.topology.members_of(kind=Gate):
            counter = counted_gates.get(gate.name)
            if gate.max_per_group is None or counter is None:
                continue
            book = GroupBook(
                gate,
                Share(gate.max_per_group),
                group_counts(counter.inside.values()),
                dict(counter.holds),
                counter.ports.roster,
                self._parts.runtime.clock,
            )
            yield gate.name, book, counter.ports.queue

    def rounds(self) -> dict[str, MemberRounds]:
        """Each gate's rounds: its counter (who is inside), its groups."""
        return {name: functools.partial(self._round, counter) for name, counter in self._counters.items()}

    def _round(self, counter: GateCounter, threads: StartThreads, _snapshot: Snapshot) -> MemberRound:
        return GateRound(
            counter.ports, threads, warm=self._parts.warm, counter=counter, books=self._parts.books
        )

    def after_spend(
        self, rounds: Round, threads: StartThreads, report: TickReport, stopped: Mapping[str, object]
    ) -> None:
        """Look for pending admissions' requests in the gates no round reached this tick (`probe_due`)."""
        now = self._parts.runtime.clock()
        due = [
            gate
            for gate in self._counted
            if gate.name not in stopped
            and not self.topology.member(gate.name, Gate).paused
            and gate.probe_due(now)
        ]
        for gate in due:
            logger.info("looking for pending admissions' requests", extra={"gate": gate.name})
            probe = GateRound(gate.ports, threads, warm=self._parts.warm, counter=gate, probing=True)
            for name, (counts, _, _) in rounds.run({gate.name: (probe, 0)}).items():
                report.count_round(name, counts)
