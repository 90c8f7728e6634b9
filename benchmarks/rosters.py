"""Section 11: who holds a place, at long sections — a lost end freed within the contract's 120 s.

Sections 8 and 10 run executions of 5–15 s, where an end with no event is found quickly
however it is looked for. Here every place is held for 9–11 minutes, so the dispatcher
must keep who holds them and reconcile that with Step Functions at scale:

- a gate of MAX 3,000 with 30,000 executions waiting, 2 % of those admitted aborted
  inside (half of them with no status change event, no release): section 10's run with
  long sections;
- a lane of MAX 3,000 whose executions run 9–11 minutes, 1 % of their ends unreported
  (the status change event lost): section 8's run with long executions.

A lost end is freed when the dispatcher's count stops counting it: for the gate, its
admission's record is deleted; for the lane, a listing the dispatcher read reaches back to
its start and no longer shows it. Only ends at least `JUDGED_SECONDS` before the run's end
are judged, and one never freed counts as the time from its end to the run's end.
"""

from __future__ import annotations

import random
from typing import Any

from benchmarks import full_scale, gates
from benchmarks.gate_report import LEAK_WITH_EVENT_SECONDS
from benchmarks.gates import JUDGED_SECONDS, percentile
from tests.support.plans import EventPlan
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import EventSourceMapping, Function

LONG = (540.0, 660.0)
"""Each section (the gate) or execution (the lane) lasts 9–11 minutes."""
GATE_DIES_INSIDE = 0.02
LANE_UNREPORTED = 0.01
"""Of the lane's ends, those whose status change event is lost."""
BOUND_SECONDS = 120.0
"""The contract: an end with no event frees its place within this."""
MEASURED_SECONDS = 900.0
"""Long enough for the first sections to end (at 9–11 minutes) and several minutes of refill after."""


def gate_run(region: str, seconds: float = MEASURED_SECONDS) -> dict[str, Any]:
    """Section 10's gate with sections of 9–11 minutes: 3,000 inside, 30,000 waiting."""
    result = gates.run(region, seconds, gates.WAITING, GATE_DIES_INSIDE, LONG)
    leaks = result["leaks"]
    result["roster"] = {
        kind: {"freed": leaks[f"freed {kind}"], "unfreed": len(leaks[f"unfreed {kind}"])}
        for kind in ("with its event", "without any event")
    }
    return result


def lane_run(region: str, seconds: float = MEASURED_SECONDS) -> dict[str, Any]:
    """Section 8's lane (batched ends) with executions of 9–11 minutes, 1 % of their ends unreported."""
    aws = InMemoryAws(
        region=region,
        lag=full_scale.LAG,
        events=EventPlan(enabled=True, delay=full_scale.EVENTS.delay, lost=LANE_UNREPORTED),
        seed=13,
    )
    aws.world.max_concurrency = full_scale.MAX_CONCURRENCY
    aws.stepfunctions.watch_unreported = True
    began = aws.scheduler.now
    end = began + full_scale.WARM_UP_SECONDS + seconds
    full_scale.keep_backlog(aws, random.Random(13), end, durations=LONG)
    function = Function(aws, full_scale.template_settings(aws), mapping=EventSourceMapping())
    function.schedule(60.0, until=end)
    full_scale.progress(aws, f"section 11: {region}, a lane of long executions", end)
    result = full_scale.measure(aws, function, region, seconds, end)
    now = aws.scheduler.now
    freed, unfreed = [], 0
    for arn, ended_at in aws.world.unreported.items():
        if ended_at < result["measured_from"] or ended_at > now - JUDGED_SECONDS:
            continue
        at = aws.stepfunctions.unlisted.get(arn)
        unfreed += at is None
        freed.append((now if at is None else at) - ended_at)
    result.update(
        design="a lane of long executions", roster={"without any event": {"freed": freed, "unfreed": unfreed}}
    )
    return result


def _figures(freed: list[float], unfreed: int) -> str:
    worst = max(freed, default=float("nan"))
    return (
        f"p50 {percentile(freed, 0.5):.1f} s, p95 {percentile(freed, 0.95):.1f} s, max {worst:.1f} s"
        f" of {len(freed)}, {unfreed} never freed"
    )


def lines(gate: dict[str, Any], lane: dict[str, Any]) -> list[str]:
    """A lost end, to its place freed: p50, p95 and max, and how many were never freed; the reads it took."""
    say = []
    for label, result in (("the gate", gate), ("the lane", lane)):
        for kind, figures in result["roster"].items():
            say.append(f"   {label}, {kind + ':':<19} {_figures(figures['freed'], figures['unfreed'])}")
    for label, result in (("the gate", gate), ("the lane", lane)):
        calls, seconds = result["calls"], result["seconds"]
        say.append(
            f"   {label}: ListExecutions {calls.get('ListExecutions', 0) / seconds:.2f}/s,"
            f" DescribeExecution {calls.get('DescribeExecution', 0) / seconds:.2f}/s,"
            f" {len(result['violations'])} over the cap, {len(result['errors'])} errors"
        )
    return say


def targets(gate: dict[str, Any], lane: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Within 120 s at p95 and max, none never freed; with its event ≤ 3 s; the cap held."""

    def bound(figures: dict[str, Any], limit: float) -> tuple[bool, str]:
        freed = figures["freed"]
        met = bool(freed) and figures["unfreed"] == 0 and max(freed) <= limit
        return met, _figures(freed, figures["unfreed"])

    long = f"for {LONG[0] / 60:.0f}–{LONG[1] / 60:.0f} min"
    return [
        (
            f"a gate, 3,000 inside {long}: a lost end freed ≤ {BOUND_SECONDS:.0f} s, p95 and max, none left",
            *bound(gate["roster"]["without any event"], BOUND_SECONDS),
        ),
        (
            f"the same gate: an end with its event freed ≤ {LEAK_WITH_EVENT_SECONDS:.0f} s",
            *bound(gate["roster"]["with its event"], LEAK_WITH_EVENT_SECONDS),
        ),
        (
            f"a lane, 3,000 RUNNING {long}, 1 % of ends unreported: freed ≤ {BOUND_SECONDS:.0f} s",
            *bound(lane["roster"]["without any event"], BOUND_SECONDS),
        ),
        (
            "the cap held in both, no error",
            not (gate["violations"] or lane["violations"] or gate["errors"] or lane["errors"]),
            f"{len(gate['violations']) + len(lane['violations'])} over the cap",
        ),
    ]


def call(name: str, region: str, seconds: float) -> dict[str, Any]:
    """Run ``gate_run`` or ``lane_run`` by name (a worker process takes a picklable call)."""
    runs = {"gate_run": gate_run, "lane_run": lane_run}
    return runs[name](region, seconds)
