"""Section 14: an adaptive pool learning a downstream's capacity it is never told, beside two static MAXes.

The unchanged tick service on the in-memory AWS (tests/support/sim), in virtual time, at
us-east-1's quotas, deployed as the template deploys it (schedule every minute, batched
end events). Pool default has MAX 500 in front of a downstream (a Glue job, say) whose
true capacity C is 300, then 120 after 20 minutes, then 240 after 40: an execution started
while C others use it fails 5 s later with ``Glue.ConcurrentRunsExceededException``. The
others run 30-90 s. The backlog never drains. Four runs: the adaptive pool (`SETTINGS`,
the recommended ones), the contract's defaults, and static pools of MAX 300 (right at
first, then too high) and MAX 120 (safe, then wasteful). Then the recommended settings
twice more: C rising from 120 to 400 after 20 minutes (beyond any level it fell at), and
C steady at 300 for the hour (what probing for more costs when there is none).

Measured per phase, after its first 5 minutes: the mean of the executions the downstream
serves (RUNNING, less those turned away) over C; over the run: the executions throttled
of all started; after each change of C: how long until RUNNING is back within 10 % of C.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from benchmarks.full_scale import EVENTS, LAG, progress, template_settings
from dispatcher.adapters.limit_items import limit_key, read_limit
from dispatcher.core.topology import DEFAULT
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import EventSourceMapping, Function, counted_logs

MAX_CONCURRENCY = 500
PHASES = ((0.0, 300), (1200.0, 120), (2400.0, 240))
"""(start of the phase, in seconds from the run's start; the downstream's capacity C then)."""
RUN_SECONDS = 3600.0
SHORTEST, LONGEST = 30.0, 90.0
THROTTLE_ERROR = "Glue.ConcurrentRunsExceededException"
THROTTLED_AFTER_SECONDS = 5.0
WAITING = 2000
"""Jobs kept queued: far more than any phase starts in a minute."""
SETTLING_SECONDS = 300.0
"""Each phase is measured after its first 5 minutes."""
NEAR = 0.10
"""Back within 10 % of C."""
SETTINGS = {"errors": [THROTTLE_ERROR], "min": 10, "initial": 200, "decrease": 0.8, "cooldown_seconds": 10}
"""The settings the targets are for (docs/adaptive.md recommends them): start at a guess on the
low side (two thirds of the capacity first expected), a lone throttle cuts 20 %, once per 10 s
(a throttle shows 5 s after its start, and its event up to a second later: one overload, one
fall); steps up come at most every 10 s."""
DEFAULTS = {"errors": [THROTTLE_ERROR]}
"""The contract's defaults beside them: a cut by half, once a minute."""
RUNS = (
    ("adaptive 0.8 / 10 s", MAX_CONCURRENCY, SETTINGS),
    ("adaptive 0.5 / 60 s", MAX_CONCURRENCY, DEFAULTS),
    ("static MAX 300", 300, None),
    ("static MAX 120", 120, None),
)
"""(label, MAX, adaptive settings or None): the first is the one the targets are for."""
RISING = ((0.0, 120), (1200.0, 400))
STEADY = ((0.0, 300),)
MORE_RUNS = (
    ("adaptive, C 120 then 400", MAX_CONCURRENCY, SETTINGS, RUN_SECONDS, RISING),
    ("adaptive, C 300 all along", MAX_CONCURRENCY, SETTINGS, RUN_SECONDS, STEADY),
)
"""The recommended settings against a capacity that rises past any level seen, and one that never moves."""
TARGETS = {"used": 0.85, "throttled": 0.02, "recovery_seconds": 300.0, "steady_throttled": 0.01}


def _keep_backlog(aws: InMemoryAws, rng: random.Random, until: float) -> None:
    """A producer that keeps `WAITING` jobs queued, each calling the downstream for 30-90 s."""
    sequence = {"next": 0}

    def top_up() -> None:
        visible, _ = aws.queue.depth()
        for _ in range(WAITING - visible):
            job = sequence["next"]
            sequence["next"] += 1
            seconds = round(rng.uniform(SHORTEST, LONGEST), 3)
            aws.queue.send(json.dumps({"job": job, "seconds": seconds, "downstream": True}), f"g{job % 100}")
        if aws.scheduler.now + 1 < until:
            aws.scheduler.call_at(aws.scheduler.now + 1, top_up)

    top_up()


def run(
    label: str,
    max_concurrency: int,
    settings: dict[str, Any] | None,
    seconds: float = RUN_SECONDS,
    capacities: tuple[tuple[float, int], ...] = PHASES,
) -> dict[str, Any]:
    """One run: the downstream's capacity over time (``capacities``), RUNNING and L sampled every second."""
    aws = InMemoryAws(region="us-east-1", lag=LAG, events=EVENTS, seed=14)
    world = aws.world
    world.throttle_error, world.throttle_after_seconds = THROTTLE_ERROR, THROTTLED_AFTER_SECONDS
    began = aws.scheduler.now
    end = began + seconds
    phases = [(began + at, capacity) for at, capacity in capacities if at < seconds]
    for at, capacity in phases:
        aws.scheduler.call_at(at, lambda capacity=capacity: setattr(world, "capacity", capacity))
    world.capacity = phases[0][1]
    _keep_backlog(aws, random.Random(14), end)
    lanes = None if settings is None else json.dumps({"pools": {DEFAULT: {"adaptive": settings}}})
    deployed = template_settings(aws).model_copy(update={"max_concurrency": max_concurrency, "lanes": lanes})
    function = Function(aws, deployed, mapping=EventSourceMapping())
    function.schedule(60.0, until=end)
    samples: list[tuple[float, int, int, int, int | None]] = []

    def sample() -> None:
        item = aws.table.item(limit_key(DEFAULT))
        limit = None if item is None else read_limit(item)[1].limit
        now = aws.scheduler.now
        samples.append(
            (now - began, world.capacity or 0, world.calling_downstream(), len(world.running()), limit)
        )
        if now + 1 < end:
            aws.scheduler.call_at(now + 1, sample)

    aws.scheduler.call_at(began + 1, sample)
    progress(aws, f"section 14: {label}", end)
    with counted_logs("WARNING"):
        aws.scheduler.run_until(end)
    aws.scheduler.stop()
    started = aws.started()
    throttled = sum(1 for execution in started for run in execution.runs if run.throttled)
    by_phase = [
        sum(
            1
            for execution in started
            for run in execution.runs
            if run.throttled and at <= run.started_at - began < at + SETTLING_SECONDS
        )
        for at, _ in capacities
    ]
    return {
        "phases": capacities,
        "throttled_settling": by_phase,
        "label": label,
        "max_concurrency": max_concurrency,
        "adaptive": settings,
        "seconds": seconds,
        "starts": len(started),
        "throttled": throttled,
        "samples": samples,
        "errors": [repr(error) for error in [*function.errors, *aws.scheduler.errors]][:5],
        "violations": world.violations[:5],
    }


def phase_use(result: dict[str, Any]) -> list[float]:
    """Each phase's mean served RUNNING over C, after its first 5 minutes."""
    used = []
    phases = result["phases"]
    bounds = [*(at for at, _ in phases if at < result["seconds"]), result["seconds"]]
    for (at, capacity), until in zip(phases, bounds[1:], strict=False):
        served = [row[2] for row in result["samples"] if at + SETTLING_SECONDS <= row[0] < until]
        used.append(sum(served) / len(served) / capacity if served else 0.0)
    return used


def recoveries(result: dict[str, Any]) -> list[float | None]:
    """After each change of C: seconds until served RUNNING is within 10 % of C (None: never in its phase)."""
    found: list[float | None] = []
    phases = result["phases"]
    bounds = [*(at for at, _ in phases), result["seconds"]]
    for (at, capacity), until in list(zip(phases, bounds[1:], strict=False))[1:]:
        inside = [
            row[0] - at
            for row in result["samples"]
            if at <= row[0] < until and abs(row[2] - capacity) <= NEAR * capacity
        ]
        found.append(min(inside) if inside else None)
    return found


def throttled_share(result: dict[str, Any]) -> float:
    """Executions throttled, of all started."""
    return result["throttled"] / max(1, result["starts"])


def _recovery(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds / 60:.1f} min"


def lines(results: list[dict[str, Any]], more: Sequence[dict[str, Any]] = ()) -> list[str]:
    """The four runs side by side: each phase's use of C, throttled, the recoveries; ``more``: a line each."""
    head = f"   {'':<40}" + "".join(f"{result['label']:>20}" for result in results)
    rows = [head]
    for index, (at, capacity) in enumerate(PHASES):
        cells = [f"{phase_use(result)[index]:.0%}" for result in results]
        rows.append(
            f"   {f'C = {capacity} from {at / 60:.0f} min: RUNNING / C':<40}"
            + "".join(f"{c:>20}" for c in cells)
        )
    shares = [f"{throttled_share(result):.1%} of {result['starts']:,}" for result in results]
    rows.append(f"   {'executions throttled, of all started':<40}" + "".join(f"{c:>20}" for c in shares))
    settling = ["/".join(f"{count:,}" for count in result["throttled_settling"]) for result in results]
    rows.append(f"   {'  of them in each phase first 5 min':<40}" + "".join(f"{c:>20}" for c in settling))
    for index, (_, capacity) in enumerate(PHASES[1:]):
        cells = [_recovery(recoveries(result)[index]) for result in results]
        rows.append(
            f"   {f'back within 10 % of C = {capacity} after':<40}" + "".join(f"{c:>20}" for c in cells)
        )
    for result in results:
        limits = [row[4] for row in result["samples"] if row[4] is not None]
        if limits:
            rows.append(
                f"   {result['label']}: L from {limits[0]}, lowest {min(limits)}, highest {max(limits)},"
                f" last {limits[-1]}"
            )
    for result in more:
        changes = " then ".join(f"{capacity} from {at / 60:.0f} min" for at, capacity in result["phases"])
        used = " / ".join(f"{share:.0%}" for share in phase_use(result))
        back = "".join(f", back within 10 % after {_recovery(seconds)}" for seconds in recoveries(result))
        rows.append(
            f"   {result['label']} (C = {changes}): RUNNING / C {used} (each after its first 5 min),"
            f" {throttled_share(result):.1%} of {result['starts']:,} throttled{back}"
        )
    return rows


def targets(
    results: list[dict[str, Any]], more: Sequence[dict[str, Any]] = ()
) -> list[tuple[str, bool, str]]:
    """The first run's and the rising run's (>= 85 % of C, <= 2 % throttled, back in <= 5 min); the steady's.

    The steady run's: <= 1 % throttled, and >= 85 % of C used.
    """
    adaptive = results[0]
    used = phase_use(adaptive)
    found = [
        (
            f"adaptive: >= 85 % of C = {capacity} used ({at / 60:.0f}-{(at + 1200) / 60:.0f} min, after 5)",
            used[index] >= TARGETS["used"],
            f"{used[index]:.0%}",
        )
        for index, (at, capacity) in enumerate(PHASES)
    ]
    share = throttled_share(adaptive)
    found.append(("adaptive: <= 2 % of executions throttled", share <= TARGETS["throttled"], f"{share:.2%}"))
    for (at, capacity), seconds in zip(PHASES[1:], recoveries(adaptive), strict=True):
        found.append(
            (
                f"adaptive: back within 10 % of C = {capacity} in <= 5 min after {at / 60:.0f} min",
                seconds is not None and seconds <= TARGETS["recovery_seconds"],
                _recovery(seconds),
            )
        )
    for result in more:
        found += _more_targets(result)
    return found


def _more_targets(result: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """A rising capacity's use, throttling and recovery; a steady one's throttling (at most 1 %)."""
    share = throttled_share(result)
    if len(result["phases"]) == 1:
        return [
            (f"{result['label']}: <= 1 % throttled", share <= TARGETS["steady_throttled"], f"{share:.2%}"),
            (
                f"{result['label']}: >= 85 % of C used (after 5 min)",
                phase_use(result)[0] >= TARGETS["used"],
                f"{phase_use(result)[0]:.0%}",
            ),
        ]
    found = [
        (
            f"{result['label']}: >= 85 % of C = {capacity} used (after 5 min)",
            used >= TARGETS["used"],
            f"{used:.0%}",
        )
        for (_, capacity), used in zip(result["phases"], phase_use(result), strict=True)
    ]
    found.append((f"{result['label']}: <= 2 % throttled", share <= TARGETS["throttled"], f"{share:.2%}"))
    for (_, capacity), seconds in zip(result["phases"][1:], recoveries(result), strict=True):
        found.append(
            (
                f"{result['label']}: back within 10 % of C = {capacity} in <= 5 min",
                seconds is not None and seconds <= TARGETS["recovery_seconds"],
                _recovery(seconds),
            )
        )
    return found


def call(
    label: str,
    max_concurrency: int,
    settings: dict[str, Any] | None,
    seconds: float,
    capacities: tuple[tuple[float, int], ...] = PHASES,
) -> dict[str, Any]:
    """`run`, as `side_by_side` calls it (a process each)."""
    return run(label, max_concurrency, settings, seconds, capacities)
