"""How one container's ports are made from names: the `Resources` that make them, and `wire`.

The boto3 adapters (`dispatcher.adapters.resources`) and the in-memory AWS of the tests and
the benchmark are both `Resources`.
"""

from __future__ import annotations

from dispatcher.core.topology import Topology
from dispatcher.tick.kind import Wired
from dispatcher.tick.kinds import TICK_KINDS, Resources
from dispatcher.tick.ports import Ports

__all__ = ["Resources", "wire"]


def wire(topology: Topology, resources: Resources) -> Ports:
    """The ports of every member of ``topology``, kind after kind: one `StateMachine` a state machine.

    The lease and the records are keyed by the environment's state machine: the lease
    serialises every tick of this dispatcher, whatever lanes it has, and the records
    are what it remembers, every state machine's in one partition, so a round's starts
    of twenty lanes are a few items, not twenty (the keys a dispatcher without lanes
    always used, so an update never runs two keepers at once, nor forgets a start).
    """
    key = topology.default_lane.state_machine_arn
    wired = Wired(key, {arn: resources.state_machine(arn) for arn in topology.state_machines})
    table = resources.ledger(key)
    return Ports(
        members=tuple(member for kind in TICK_KINDS for member in kind.wire(topology, resources, wired)),
        lease=resources.lease(key),
        ledger=table,
        reads=table,
        limits=table,
        member_queues=table,
        jobs=resources.job_records(key),
        sizes=table,
    )
