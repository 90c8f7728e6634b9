"""How one container's ports are made from names: the `Resources` that make them, and `wire`.

The boto3 adapters (`dispatcher.adapters.resources`) and the in-memory AWS of the tests and
the benchmark are both `Resources`.
"""

from __future__ import annotations

from typing import Protocol

from dispatcher.core.topology import Gate, Lane, Topology
from dispatcher.tick.ports import (
    DeadLetters,
    GatePorts,
    GateRoster,
    JobQueue,
    JobRecords,
    LanePorts,
    Lease,
    Ports,
    Roster,
    StartLedger,
    StartRate,
    StateMachine,
    TaskTokens,
)


class Resources(Protocol):
    """Makes the ports of one container from names: boto3's adapters, or an in-memory AWS's."""

    def queue(self, url: str) -> JobQueue:
        """The FIFO job queue at ``url``."""
        ...

    def dead_letters(self, url: str) -> DeadLetters:
        """The FIFO dead-letter queue at ``url``."""
        ...

    def state_machine(self, arn: str) -> StateMachine:
        """The state machine ``arn``: its executions, and its starts."""
        ...

    def ledger(self, key: str) -> StartLedger:
        """The state table's start ledger of one dispatcher, keyed by ``key``."""
        ...

    def lane_roster(self, key: str) -> Roster:
        """The state table's rosters of one dispatcher's tenant lanes, keyed by ``key``."""
        ...

    def gate_roster(self, key: str) -> GateRoster:
        """The state table's rosters of one dispatcher's gates, keyed by ``key``."""
        ...

    def lease(self, key: str) -> Lease:
        """The tick lease stored under ``key``."""
        ...

    def start_rate(self, lane: str, starts_per_second: float) -> StartRate:
        """Lane ``lane``'s start-rate bucket."""
        ...

    def task_tokens(self) -> TaskTokens:
        """`SendTaskSuccess`, for the gates."""
        ...

    def job_records(self, key: str) -> JobRecords:
        """The state table's pending cancellations and job records of one dispatcher, keyed by ``key``."""
        ...


def wire(topology: Topology, resources: Resources) -> Ports:
    """The ports of every lane and gate of ``topology``: one `Executions` per lane's state machine.

    The lease and the records are keyed by the environment's state machine: the lease
    serialises every tick of this dispatcher, whatever lanes it has, and the records
    are what it remembers, every state machine's in one partition, so a round's starts
    of twenty lanes are a few items, not twenty (the keys a dispatcher without lanes
    always used, so an update never runs two keepers at once, nor forgets a start).
    """
    machines = {arn: resources.state_machine(arn) for arn in topology.state_machines}
    key = topology.default_lane.state_machine_arn
    lane_roster, gate_roster = resources.lane_roster(key), resources.gate_roster(key)
    lanes = tuple(
        LanePorts(
            name=lane.name,
            queue=resources.queue(lane.queue_url),
            dead_letters=resources.dead_letters(lane.dead_letter_queue_url),
            roster=lane_roster,
            state_machine=machines[lane.state_machine_arn],
            admissions=machines[lane.state_machine_arn],
            rate=(
                None
                if lane.starts_per_second is None
                else resources.start_rate(lane.name, lane.starts_per_second)
            ),
        )
        for lane in topology.members_of(kind=Lane)
    )
    gates = tuple(
        GatePorts(
            name=gate.name,
            queue=resources.queue(gate.queue_url),
            dead_letters=resources.dead_letters(gate.dead_letter_queue_url),
            roster=gate_roster,
            state_machine=machines.get(gate.state_machine_arn)
            or resources.state_machine(gate.state_machine_arn),
            tokens=resources.task_tokens(),
            admissions=gate_roster,
        )
        for gate in topology.members_of(kind=Gate)
    )
    return Ports(
        lanes=lanes,
        lease=resources.lease(key),
        ledger=resources.ledger(key),
        gates=gates,
        jobs=resources.job_records(key),
    )
