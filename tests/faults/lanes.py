"""A second lane in generated scenarios: in the same state machine and pool, in pool default, or its own.

A quarter of the scenarios that are not wide add lane ``urgent``: some of the jobs go
to its own queue (those no other job refers to: valid jobs named by their MessageId,
and poison that names nobody else), with a priority, sometimes a start rate, and an
operator who pauses and resumes the lane between ticks. The lane is one of three kinds:

- ``shared``: it starts the default lane's state machine, in pool default;
- ``own``: a state machine of its own, counted in pool default with the default lane's,
  sometimes with a MAX of its own;
- ``pool``: a state machine of its own in a pool of its own, whose MAX the operator may
  change live (``pools.<pool>.max_concurrency`` in the control parameter).

A lane of kind ``shared`` also takes some repeats of lane default's named jobs (same
name, same input): two lanes admit the same execution name, and one execution comes of it.

The checks are per pool and per lane: each pool's cap (and the lane's own MAX) at every
start, by the world; no loss, no duplicates, order within each lane's groups, poison in
its own lane's DLQ; and the lane's start rate, never more than ``b + r·t`` of its
`StartExecution` calls in any window of virtual time.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dispatcher.core import rate
from dispatcher.core.control import Control, parse_control
from dispatcher.core.overrides import Override
from dispatcher.core.topology import DEFAULT
from dispatcher.local.stack import create_lane
from tests.support.rate_bound import worst_window_excess

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tests.faults.jobs import Job
    from tests.support.world import World

LANE = "urgent"
LANE_POOL = "glue"
"""The pool of a lane of kind ``pool``."""
LANE_SHARE = 0.25
"""Of the scenarios that are not wide."""
KINDS = ("shared", "own", "pool")


@dataclass
class LanePlan:
    """Lane ``urgent``: its kind, priority, MAX and rate, and what the operator does to it between ticks."""

    priority: int
    starts_per_second: float | None = None
    pauses: dict[int, bool] = field(default_factory=dict)
    """Tick → the operator pauses (True) or resumes (False) the lane before it."""
    kind: str = "shared"
    max_concurrency: int | None = None
    """The lane's own MAX (kinds ``own`` and ``pool``)."""
    pool_max: int = 0
    """The MAX of its own pool (kind ``pool``)."""
    pool_changes: dict[int, int] = field(default_factory=dict)
    """Tick → the pool's new MAX, set by the operator before it (kind ``pool``)."""
    crossing: list[str] = field(default_factory=list)
    """Keys of repeats of lane default's named jobs sent to this lane's queue (kind ``shared``)."""

    def burst(self) -> int:
        """Starts the lane's rate allows at once (its bucket's size)."""
        return math.floor(max(1.0, self.starts_per_second or math.inf))

    def describe(self) -> str:
        """One line for a failure report."""
        return (
            f"lane(kind={self.kind} priority={self.priority} max={self.max_concurrency}"
            f" rate={self.starts_per_second} pauses={self.pauses} pool_max={self.pool_max}"
            f" pool_changes={self.pool_changes} crossing={len(self.crossing)})"
        )


def plan_lane(
    rng: random.Random,
    jobs: Sequence[Job],
    fault_ticks: int,
    *,
    wide: bool,
    crossing: random.Random | None = None,
) -> LanePlan | None:
    """Maybe a lane, and which jobs go to it (``job.lane`` is set).

    ``crossing``: draws for a lane of kind ``shared`` only, which sends some repeats of a
    named job of lane default to its own queue: two lanes then admit the same execution
    name (same input), and only one execution may come of it.
    """
    if wide or rng.random() >= LANE_SHARE:
        return None
    movable = [
        job
        for job in jobs
        if job.duplicate_of is None
        and ((job.poison is None and job.name is None) or job.poison not in {None, "name collision"})
    ]
    for job in movable:
        if rng.random() < 0.5:
            job.lane = LANE
            job.group = f"{LANE}-{job.group}"
    pauses: dict[int, bool] = {}
    if rng.random() < 0.4 and fault_ticks > 1:
        paused_at = rng.randrange(fault_ticks - 1)
        pauses[paused_at] = True
        pauses[rng.randrange(paused_at + 1, fault_ticks)] = False
    plan = LanePlan(
        priority=rng.choice([0, 1, 5]),
        starts_per_second=rng.choice([None, None, 0.5, 2.0]),
        pauses=pauses,
        kind=rng.choice(KINDS),
    )
    if plan.kind != "shared" and rng.random() < 0.5:
        plan.max_concurrency = rng.choice([1, 2, 3])
    if plan.kind == "pool":
        plan.pool_max = rng.choice([1, 2, 4])
        if rng.random() < 0.5:
            plan.pool_changes = {rng.randrange(fault_ticks): rng.choice([0, 1, 3, 5])}
    if plan.kind == "shared" and crossing is not None:
        for job in jobs:
            if job.duplicate_of is not None and job.lane is None and crossing.random() < 0.5:
                job.lane = LANE
                job.group = f"{LANE}-{job.group}"
                plan.crossing.append(job.key)
    return plan


def merged_lanes(*parts: dict[str, Any]) -> dict[str, Any] | None:
    """One ``LANES`` of the parts each member adds: pools, lanes and gates (None: no part)."""
    if not parts:
        return None
    return {
        "pools": {name: pool for part in parts for name, pool in part.get("pools", {}).items()},
        "lanes": [lane for part in parts for lane in part.get("lanes", [])],
        "gates": [gate for part in parts for gate in part.get("gates", [])],
    }


def steer_lane(ssm: Any, parameter: str, *, paused: bool) -> None:
    """The operator pauses or resumes the lane (read, modify, write, as `dispatcher pause --lane`)."""
    steer(ssm, parameter, lambda current: {"lanes": {**current.lanes, LANE: Override(paused=paused)}})


def steer_pool(ssm: Any, parameter: str, max_concurrency: int) -> None:
    """The operator sets the lane's pool's MAX (as `dispatcher set-max --pool`)."""
    steer(
        ssm,
        parameter,
        lambda current: {
            "pools": {
                **current.pools,
                LANE_POOL: current.pools.get(LANE_POOL, Override()).model_copy(
                    update={"max_concurrency": max_concurrency}
                ),
            }
        },
    )


def steer(ssm: Any, parameter: str, change: Any) -> None:
    """Read, modify, write the control parameter.

    ``ssm``: the operator's own client, made before the dispatcher's process hooks the
    default session (a dead dispatcher process must not take the operator with it).
    """
    try:
        current = parse_control(parameter, ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
    except ssm.exceptions.ParameterNotFound:
        current = Control()
    updated = current.model_copy(update=change(current))
    ssm.put_parameter(Name=parameter, Value=updated.as_json(), Type="String", Overwrite=True)


class LaneRun:
    """The second lane of one run: its resources, its caps in the world, the operator's changes, checks."""

    def __init__(self, plan: LanePlan, stack_name: str, default_machine: str, default_max: int) -> None:
        self.plan = plan
        options: dict[str, Any] = {"priority": plan.priority}
        if plan.starts_per_second is not None:
            options["starts_per_second"] = plan.starts_per_second
        if plan.max_concurrency is not None:
            options["max_concurrency"] = plan.max_concurrency
        if plan.kind == "pool":
            options["pool"] = LANE_POOL
        shared = default_machine if plan.kind == "shared" else None
        self.entry = create_lane(stack_name, LANE, state_machine_arn=shared, wait_seconds=0, **options)
        self.machine: str = self.entry["state_machine_arn"]
        self._default_machine = default_machine
        self._default_max = default_max
        self._pool_max = plan.pool_max
        self._pending_max: int | None = None
        """A pool MAX the operator set that a warm container may not have read yet."""

    def lanes_variable(self) -> str:
        """``LANES``: the lane, and its pool."""
        pools = {LANE_POOL: {"max_concurrency": self.plan.pool_max}} if self.plan.kind == "pool" else {}
        return json.dumps({"pools": pools, "lanes": [self.entry]})

    def cap(self, world: World) -> None:
        """Have the world check each pool's cap, and the lane's own MAX, at every start."""
        world.max_concurrency = None
        default = {self._default_machine}
        if self.plan.kind == "pool":
            world.pool_caps[LANE_POOL] = (frozenset({self.machine}), self._checked_pool_max())
        else:
            default.add(self.machine)
        world.pool_caps[DEFAULT] = (frozenset(default), self._default_max)
        if self.plan.max_concurrency is not None:
            world.pool_caps[f"lane {LANE}"] = (frozenset({self.machine}), self.plan.max_concurrency)

    def _checked_pool_max(self) -> int:
        # Until a cold start has read the parameter again, a warm container may use either MAX.
        return self._pool_max if self._pending_max is None else max(self._pool_max, self._pending_max)

    def before_tick(self, ssm: Any, parameter: str, tick: int | None, world: World) -> None:
        """The operator's changes planned before this scheduled tick."""
        if tick is None:
            return
        if tick in self.plan.pauses:
            steer_lane(ssm, parameter, paused=self.plan.pauses[tick])
        if tick in self.plan.pool_changes:
            self._pending_max = self.plan.pool_changes[tick]
            steer_pool(ssm, parameter, self._pending_max)
            self.cap(world)

    def cold_start(self, world: World) -> None:
        """A tick that reads the control parameter afresh: a pool MAX set before it holds from now on."""
        if self._pending_max is not None:
            self._pool_max, self._pending_max = self._pending_max, None
            self.cap(world)

    def resume(self, ssm: Any, parameter: str, world: World) -> None:
        """Before the quiet phase: the lane runs, and its pool has a MAX to drain with.

        The run then drops every container's clients (and their cached parameter), so
        what is written here holds from the next tick on.
        """
        if self.plan.pauses:
            steer_lane(ssm, parameter, paused=False)
        effective = self._pool_max if self._pending_max is None else self._pending_max
        if self.plan.kind == "pool" and effective == 0:
            self._pending_max = max(1, self.plan.pool_max)
            steer_pool(ssm, parameter, self._pending_max)

    def read_afresh(self, world: World) -> None:
        """Every container's cached parameter is gone: what the operator set holds from now on."""
        self.cold_start(world)

    def limited(self) -> bool:
        """Whether the lane drains slower than its pool default's MAX: a MAX, a pool or a rate of its own."""
        return (
            self.plan.max_concurrency is not None
            or self.plan.kind == "pool"
            or self.plan.starts_per_second is not None
        )

    def limit(self) -> int:
        """The most of the lane's jobs a quiet tick may start (its MAX, its pool's; its burst if rated)."""
        limits = [self.plan.max_concurrency, self._pool_max if self.plan.kind == "pool" else None]
        if self.plan.starts_per_second is not None:
            limits.append(self.plan.burst())
        return max(1, min((limit for limit in limits if limit is not None), default=self._default_max))

    def rate_violations(self, calls: Sequence[tuple[float, str, str]], names: set[str]) -> list[str]:
        """The lane's `StartExecution` calls (moment, state machine, name) against ``b + r·t``."""
        per_second = self.plan.starts_per_second
        if per_second is None:
            return []
        moments = [
            moment
            for moment, machine, name in calls
            if machine == self.machine and (self.plan.kind != "shared" or name in names)
        ]
        excess = worst_window_excess(moments, per_second)
        if excess > rate.burst(per_second) + 1e-6:
            return [
                f"rate: lane {LANE} made {excess:.2f} StartExecution calls over r·t in a window"
                f" (r = {per_second}, b = {rate.burst(per_second):.0f})"
            ]
        return []
