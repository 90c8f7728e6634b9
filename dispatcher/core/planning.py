"""Planning one tick: each pool's RUNNING and free slots, and what each of its members may claim of them.

From the topology's live limits, what the count found (each state machine's RUNNING, each
gate's executions inside) and each rate-capped lane's tokens, before any queue is read.
The tick then spends each pool's free slots pass after pass (`dispatcher.core.allocation`).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dispatcher.core.allocation import Claim, room_of
from dispatcher.core.counting import pool_count
from dispatcher.core.topology import Gate, Lane, PoolLimit, Topology


@dataclass(frozen=True)
class PoolPlan:
    """One pool this tick: its RUNNING, its free slots and its members' claims on them."""

    pool: PoolLimit
    running: int
    free: int
    claims: tuple[Claim, ...]


@dataclass(frozen=True)
class TickPlan:
    """Every active pool's plan, and the rate-capped lanes their tokens held below what was free."""

    pools: tuple[PoolPlan, ...]
    bound: frozenset[str] = frozenset()
    """Rate-capped lanes offered fewer starts than their pool and own MAX allowed, by their tokens."""
    starved: frozenset[str] = frozenset()
    """Of those, the lanes with no token at all."""

    @property
    def free(self) -> int:
        """Free slots over every pool."""
        return sum(pool.free for pool in self.pools)


def bound_by_rate(tokens: int | None, room: int) -> tuple[bool, bool]:
    """Whether a lane's tokens bound it below ``room`` (what its pool and own MAX left it), and had none."""
    bound = tokens is not None and tokens < room
    return bound, bound and tokens == 0


def plan_tick(
    topology: Topology,
    pools: Sequence[PoolLimit],
    running: Mapping[str, int],
    inside: Mapping[str, int],
    tokens: Mapping[str, int | None],
) -> TickPlan:
    """Each pool's RUNNING, free slots and claims (its lanes', then its gates').

    ``running``: each state machine's RUNNING, by ARN; ``inside``: each gate's executions
    inside; ``tokens``: each lane's start-rate tokens (None: no rate, or paused).
    """
    plans: list[PoolPlan] = []
    bound: set[str] = set()
    starved: set[str] = set()
    for pool in pools:
        count = pool_count(topology, pool, running, inside)
        claims: list[Claim] = []
        for lane in topology.members_of(pool.name, Lane):
            have = tokens.get(lane.name)
            room = room_of(lane.max_concurrency, running[lane.state_machine_arn], paused=lane.paused)
            is_bound, none = bound_by_rate(have, min(room, count.free))
            if is_bound:
                bound.add(lane.name)
            if none:
                starved.add(lane.name)
            claims.append(
                Claim(
                    lane.name,
                    lane.priority,
                    room_of(lane.max_concurrency, running[lane.state_machine_arn], have, paused=lane.paused),
                )
            )
        claims += [
            Claim(
                gate.name, gate.priority, room_of(gate.max_concurrency, inside[gate.name], paused=gate.paused)
            )
            for gate in topology.members_of(pool.name, Gate)
        ]
        plans.append(PoolPlan(pool, count.running, count.free, tuple(claims)))
    return TickPlan(tuple(plans), frozenset(bound), frozenset(starved))
