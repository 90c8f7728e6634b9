"""The gate's part of `dispatcher status`: who is inside each gate, who waits, its dead letters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispatcher.adapters.gate_roster import RosterTable
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.kind_status import KindStatus, MemberRow, StatusRead, limit, yes
from dispatcher.cli.output import table
from dispatcher.core.kinds.gate import GATE_KIND, Gate
from dispatcher.core.rosters import RosterRead
from dispatcher.core.topology import Member, Topology


@dataclass(frozen=True)
class GateStatus:
    """One gate: who is inside (as the dispatcher counts them), who waits (its requests), its dead letters."""

    name: str
    pool: str
    inside: int
    waiting: int
    paused: bool
    max_concurrency: int | None
    """The gate's own MAX (None: its pool's alone)."""
    dead_letters: int
    settings: dict[str, Any] = field(default_factory=dict)


def read_gates(read: StatusRead) -> KindStatus:
    """Each gate: who is inside (its admissions in the state table), who waits (its queue), dead letters."""
    gates = read.topology.members_of(kind=Gate)
    found: tuple[GateStatus, ...] = ()
    if gates:
        roster = RosterTable(
            read.aws.client("dynamodb"),
            read.resources.need("state_table"),
            read.topology.default_lane.state_machine_arn,
        )
        found = tuple(_gate(read, roster, gate) for gate in gates)
    counts = {gate.count_key: status.inside for gate, status in zip(gates, found, strict=True)}
    return KindStatus(GATE_KIND, found, counts, gates_table)


def _gate(read: StatusRead, roster: RosterTable, gate: Gate) -> GateStatus:
    inside = len(roster.read(gate).entries)
    return GateStatus(
        gate.name,
        gate.pool,
        inside,
        sum(read.depth(gate.queue_url)),
        read.halted(gate),
        gate.max_concurrency,
        sum(read.depth(gate.dead_letter_queue_url)),
        read.settings_of(gate),
    )


def gates_table(gates: Sequence[MemberRow]) -> str:
    """A row per gate."""
    return table(
        ["GATE", "POOL", "MAX", "PAUSED", "INSIDE", "WAITING", "DEAD LETTERS"],
        [
            [
                gate.name,
                gate.pool,
                limit(gate.max_concurrency),
                yes(gate.paused),
                str(gate.inside),
                str(gate.waiting),
                str(gate.dead_letters),
            ]
            for gate in gates
            if isinstance(gate, GateStatus)
        ],
    )


def gate_rosters(
    aws: Aws, resources: Resources, topology: Topology, wanted: Callable[[Member], bool]
) -> list[tuple[Member, RosterRead]]:
    """Each wanted gate (every gate counts its executions inside by group), with its roster."""
    gates = [gate for gate in topology.members_of(kind=Gate) if wanted(gate)]
    if not gates:
        return []
    roster = RosterTable(
        aws.client("dynamodb"), resources.need("state_table"), topology.default_lane.state_machine_arn
    )
    return [(gate, roster.read(gate)) for gate in gates]
