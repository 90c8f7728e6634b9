"""A large job's reservation over a tick: read with the window, honoured by the passes, kept or let go.

A tick's `Allocation` of a pool keeps the pool's freed slots for the large job its
reservation names (`dispatcher.core.allocation.Reserve`). Once the tick spent its slots, the
reservation is written again only when it changed: its job was admitted (it goes), its lane
was offered its size and the job didn't come (it goes: found short again, it comes back), it
no longer fits its pool or lane (paused, removed, a limit lowered: it goes), or a lane of the
pool found a large job short with none kept, or one of a higher priority than the kept one's.
"""

from __future__ import annotations

from collections.abc import Mapping

from dispatcher.core.allocation import Allocation, Reserve
from dispatcher.core.errors import TransientError
from dispatcher.core.planning import PoolPlan
from dispatcher.core.sizes import Reservation, reservation_after
from dispatcher.core.topology import Lane, Topology
from dispatcher.telemetry import logger
from dispatcher.tick.ports import SizeRecords


def valid(topology: Topology, pool: str, reservation: Reservation | None) -> Reservation | None:
    """The reservation, if its lane is still the pool's, not paused, and its job fits the pool and lane."""
    if reservation is None:
        return None
    lanes = {lane.name: lane for lane in topology.members_of(pool, Lane)}
    lane = lanes.get(reservation.lane)
    if lane is None or lane.paused:
        return None
    limits = (topology.pool(pool).max_concurrency, lane.max_concurrency)
    if any(limit is not None and reservation.slots > limit for limit in limits):
        return None
    return reservation


def reserve_of(planned: PoolPlan, reservation: Reservation | None) -> Reserve | None:
    """What a pool's allocation keeps for its reservation this tick (already `valid`).

    A job larger than an adaptive pool's limit L, within its MAX, starts alone once the pool
    runs nothing: an adaptive limit bounds load, it must not make a job impossible.
    """
    if reservation is None:
        return None
    pool = planned.pool
    alone = reservation.slots > pool.ceiling and planned.running == 0 and not pool.halted
    return Reserve(reservation.lane, reservation.slots, alone=alone)


class ReservationKeeper:
    """Writes each pool's reservation once a tick, when it changed."""

    def __init__(self, records: SizeRecords | None, topology: Topology) -> None:
        self._records = records
        self._topology = topology

    def settle(
        self,
        read: Mapping[str, Reservation],
        allocations: Mapping[str, Allocation],
        lanes: Mapping[str, tuple[bool, tuple[str, int] | None]],
        now: float,
    ) -> None:
        """Keep or let go each pool's reservation (``read``: as the tick read them).

        ``lanes``: each lane's tick: whether its reserved job was admitted, and the first large
        job it found short (its name and size).
        """
        for pool, allocation in allocations.items():
            current = valid(self._topology, pool, read.get(pool))
            if current is not None and (
                lanes.get(current.lane, (False, None))[0] or allocation.reserve_offered
            ):
                current = None
            members = self._topology.members_of(pool, Lane)
            short = {
                lane.name: job
                for lane in members
                if (job := lanes.get(lane.name, (False, None))[1]) is not None
            }
            priorities = {lane.name: lane.priority for lane in members if not lane.paused}
            after = reservation_after(current, short, priorities, now)
            if after != read.get(pool):
                self._write(pool, after)

    def _write(self, pool: str, reservation: Reservation | None) -> None:
        if self._records is None:
            return
        try:
            self._records.record_reservation(pool, reservation)
        except TransientError as error:  # a later tick finds the job short again
            logger.warning("could not keep a pool's reservation", extra={"pool": pool, "reason": str(error)})
        else:
            logger.info(
                "reservation" if reservation is not None else "reservation let go",
                extra={
                    "pool": pool,
                    **(
                        {}
                        if reservation is None
                        else {"lane": reservation.lane, "job": reservation.name, "slots": reservation.slots}
                    ),
                },
            )
