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
from dispatcher.core.topology import Pool, Topology


@dataclass(frozen=True)
class PoolPlan:
    """One pool this tick: its RUNNING, its free slots and its members' claims on them."""

    pool: Pool
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
    pools: Sequence[Pool],
    running: Mapping[str, int],
    pools_running: Mapping[str, int],
    tokens: Mapping[str, int | None],
) -> TickPlan:
    """Each pool's RUNNING, free slots and claims (its members', in configuration order).

    ``running``: what holds a slot under each count key (`Member.count_key`);
    ``pools_running``: each pool's RUNNING (`pool_running`, counted once a tick);
    ``tokens``: each rate-capped member's start-rate tokens (None or absent: no rate, or paused).
    """
    plans: list[PoolPlan] = []
    bound: set[str] = set()
    starved: set[str] = set()
    for pool in pools:
        count = pool_count(pool, pools_running[pool.name])
        claims: list[Claim] = []
        for member in topology.members_of(pool.name):
            have = tokens.get(member.name)
            held = running[member.count_key]
            room = room_of(member.max_concurrency, held, paused=member.paused)
            is_bound, none = bound_by_rate(have, min(room, count.free))
            if is_bound:
                bound.add(member.name)
            if none:
                starved.add(member.name)
            claims.append(
                Claim(
                    member.name,
                    member.priority,
                    room_of(member.max_concurrency, held, have, paused=member.paused),
                )
            )
        plans.append(PoolPlan(pool, count.running, count.free, tuple(claims)))
    return TickPlan(tuple(plans), frozenset(bound), frozenset(starved))
