"""Every kind of member's side of the tick, registered once (in `dispatcher.core.kinds.KINDS`' order).

`wire` makes each kind's ports and the `Ticker` asks each kind's `KindTick` for its
counters, groups and rounds: a new kind is one `TickKind` here, and its `Resources`.
"""

from __future__ import annotations

from typing import Protocol

from dispatcher.tick.gate_kind import GateResources, GateTick, wire_gates
from dispatcher.tick.kind import TickKind
from dispatcher.tick.lane_kind import LaneResources, LaneTick, wire_lanes
from dispatcher.tick.ports import JobRecords, Lease, StateTable


class Resources(LaneResources, GateResources, Protocol):
    """Makes the ports of one container from names: boto3's adapters, or an in-memory AWS's."""

    def ledger(self, key: str) -> StateTable:
        """The state table of one dispatcher, keyed by ``key``: its start ledger, reads, limits, queues."""
        ...

    def lease(self, key: str) -> Lease:
        """The tick lease stored under ``key``."""
        ...

    def job_records(self, key: str) -> JobRecords:
        """The state table's pending cancellations and job records of one dispatcher, keyed by ``key``."""
        ...


TICK_KINDS: tuple[TickKind[Resources], ...] = (TickKind(wire_lanes, LaneTick), TickKind(wire_gates, GateTick))
"""Every kind's side of the tick: the primary one (lane) first, as `dispatcher.core.kinds.KINDS`."""
