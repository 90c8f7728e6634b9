"""Adaptive pools in generated scenarios: pool default learns its limit from throttle signals.

A share of the scenarios gives pool default ``adaptive`` settings (in ``LANES``, or, in a
controlled scenario, in the control parameter: the operator's live settings), and a
downstream API of a capacity below MAX: a run of a job that calls it, started while that
many of them run, fails a second later with ``Downstream.Throttled`` (`World.capacity`).
Sometimes the outage's ``Job.Failed`` counts as a signal too. Some operators turn
``adaptive`` off and on again between ticks. The world checks, at every start and every
write of the limit (`tests.support.adaptive_watch`): RUNNING never above L, L within its
bounds, and no signal's decrease applied twice. The quiet phase ends the throttling (the
downstream's capacity comes back) so that everything drains.
"""

from __future__ import annotations

import io
import json
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from unittest.mock import patch

from dispatcher import cli
from dispatcher.core.adaptive import Adaptive, AdaptiveDocument, initial_limit
from dispatcher.core.overrides import PoolOverride
from dispatcher.core.topology import DEFAULT
from tests.faults.lanes import steer
from tests.support.adaptive_watch import AdaptiveWatch
from tests.support.runs import OUTAGE_ERROR, THROTTLE_ERROR

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tests.faults.jobs import Job
    from tests.faults.run import ScenarioRun
    from tests.support.runs import Execution

ADAPTIVE_SHARE = 0.3
"""Of the scenarios that are not wide."""


@dataclass
class AdaptivePlan:
    """Pool default's adaptive settings, the downstream's capacity, and what the operator does."""

    errors: tuple[str, ...]
    min: int
    decrease: float
    cooldown_seconds: float
    capacity: int | None
    initial: int | None = None
    """Where L starts (None: MAX), drawn below MAX, above it, or below min too."""
    """Runs of downstream-calling jobs beyond this many at once fail (None: no capacity of its own)."""
    in_parameter: bool = False
    """The settings are the control parameter's (``pools.default.adaptive``), not ``LANES``'."""
    switches: dict[int, bool] = field(default_factory=dict)
    """Tick → the operator turns adaptive off (False) or on again (True) before it (control parameter)."""

    def settings(self) -> Adaptive:
        """The settings the dispatcher reads."""
        return Adaptive(self.errors, self.min, self.initial, self.decrease, self.cooldown_seconds)

    def document(self) -> dict[str, Any]:
        """``pools.default.adaptive``."""
        return {
            "errors": list(self.errors),
            "min": self.min,
            **({} if self.initial is None else {"initial": self.initial}),
            "decrease": self.decrease,
            "cooldown_seconds": self.cooldown_seconds,
        }

    def describe(self) -> str:
        """One line for a failure report."""
        return (
            f"adaptive(errors={list(self.errors)} min={self.min} initial={self.initial}"
            f" decrease={self.decrease}"
            f" cooldown={self.cooldown_seconds} capacity={self.capacity} in_parameter={self.in_parameter}"
            f" switches={self.switches})"
        )


CALLING_SHARE = 0.7
"""Of an adaptive scenario's valid jobs, those that call the downstream API (a repeat as its original)."""


def plan_adaptive(
    rng: random.Random, jobs: Sequence[Job], max_concurrency: int, fault_ticks: int, *, wide: bool
) -> AdaptivePlan | None:
    """Maybe an adaptive pool default, drawn from its own stream (the other draws stay as they were).

    Most of its valid jobs call the downstream API, whose capacity is below MAX.
    """
    if wide or rng.random() >= ADAPTIVE_SHARE:
        return None
    calling = {job.key for job in jobs if job.duplicate_of is None and rng.random() < CALLING_SHARE}
    for job in jobs:
        if job.poison is None and (job.duplicate_of or job.key) in calling:
            body = json.loads(job.body)
            if isinstance(body, dict):
                job.body = json.dumps({**body, "downstream": True})
    errors = (THROTTLE_ERROR, OUTAGE_ERROR) if rng.random() < 0.4 else (THROTTLE_ERROR,)
    plan = AdaptivePlan(
        errors=errors,
        min=rng.choice([1, 1, 2]),
        decrease=rng.choice([0.5, 0.7, 0.8, 0.9]),
        cooldown_seconds=rng.choice([0.0, 2.0, 10.0, 20.0, 60.0]),
        capacity=None if rng.random() < 0.2 else rng.randint(1, max(1, max_concurrency - 1)),
        in_parameter=rng.random() < 0.3,
    )
    plan.initial = rng.choice([None, None, 1, max(1, max_concurrency // 2), max_concurrency + 3])
    if plan.in_parameter and fault_ticks > 1 and rng.random() < 0.4:
        off = rng.randrange(fault_ticks - 1)
        plan.switches = {off: False, rng.randrange(off + 1, fault_ticks): True}
    return plan


class AdaptiveRun:
    """Pool default's adaptive settings in one run: where they are, the world's watch, the operator."""

    def __init__(self, plan: AdaptivePlan, run: ScenarioRun) -> None:
        self.plan = plan
        self._run = run
        self.resets = 0
        """How often the operator ran `dispatcher reset-limit` (the quiet phase may come more than once)."""
        world = run.world
        machines = {run.stack.state_machine_arn}
        if run.lane_run is not None and run.lane_run.plan.kind != "pool":
            machines.add(run.lane_run.machine)
        world.capacity = plan.capacity
        world.adaptive = AdaptiveWatch(
            DEFAULT,
            frozenset(machines),
            run.scenario.max_concurrency,
            plan.settings(),
            self._executions,
            (lambda: world.gates.inside_pool(DEFAULT)) if world.gates is not None else (lambda: 0),
        )
        if plan.in_parameter:
            self._steer(plan.document())

    def _executions(self, name: str) -> list[Execution]:
        """Every execution called ``name``: of a lane's state machine, or a gate's (a member of the pool)."""
        return [execution for execution in self._run.world.executions.values() if execution.name == name]

    def _steer(self, adaptive: dict[str, Any] | bool) -> None:
        """The operator writes pool default's adaptive settings (or ``false``) in the control parameter."""
        setting = AdaptiveDocument.model_validate(adaptive) if isinstance(adaptive, dict) else False
        steer(
            self._run.ssm,
            self._run.stack.control_parameter,
            lambda current: {"pools": {**current.pools, DEFAULT: PoolOverride(adaptive=setting)}},
        )

    def lanes(self) -> dict[str, Any] | None:
        """Its part of ``LANES`` (None: the settings are the control parameter's)."""
        return None if self.plan.in_parameter else {"pools": {DEFAULT: {"adaptive": self.plan.document()}}}

    def before_tick(self, tick: int | None) -> None:
        """The operator turns adaptive off, or on again, before this scheduled tick."""
        if tick not in self.plan.switches:
            return
        on = self.plan.switches[tick]
        self._steer(self.plan.document() if on else False)
        if not on and self._run.world.adaptive is not None:
            self._run.world.adaptive.checking = False  # L is MAX from here on, once every container reads it
        self._run.world.injected[f"adaptive turned {'on' if on else 'off'} by the operator"] += 1

    def figures(self) -> Counter[str]:
        """What the limit did in this run (`tests.faults.tally.ADAPTIVE_FIGURES`)."""
        world = self._run.world
        watch = world.adaptive
        assert watch is not None
        low = min(self.plan.min, self._run.scenario.max_concurrency)
        return Counter(
            {
                "runs throttled by the downstream's capacity": world.injected[
                    "run throttled by the downstream API"
                ],
                "limit written by a tick": watch.writes,
                "cuts (each by its own signal)": len(watch.cuts),
                "scenarios whose limit was cut to its min": int(watch.lowest == low and bool(watch.cuts)),
                "scenarios reset by the operator (reset-limit)": int(self.resets > 0),
            }
        )

    def quiet_slowdown(self) -> int:
        """How many times slower than at MAX the quiet phase may drain: after `reset-limit`, L is ``initial``.

        L only grows from there (nothing throttles in the quiet phase), so a tick starts at least
        ``initial`` of what MAX would.
        """
        start = initial_limit(self.plan.settings(), self._run.scenario.max_concurrency)
        return math.ceil(self._run.scenario.max_concurrency / max(1, start))

    def quiet(self) -> list[str]:
        """The quiet phase: the downstream is back, and the operator runs `dispatcher reset-limit`.

        Its capacity is back, and its outage over when that is a signal. What went wrong, if anything.
        """
        world = self._run.world
        world.capacity = None
        if OUTAGE_ERROR in self.plan.errors:
            world.outage_until = min(world.outage_until, world.now)
        out = io.StringIO()
        with patch("dispatcher.cli.control.time", SimpleNamespace(time=world.time)):  # the world's clock
            status = cli.main(["reset-limit", "--json"], out=out)
        said = json.loads(out.getvalue()) if status == 0 else {}
        if said.get("limit") != initial_limit(self.plan.settings(), self._run.scenario.max_concurrency):
            return [f"reset-limit: exit {status}, {out.getvalue()!r}"]
        self.resets += 1
        return []
