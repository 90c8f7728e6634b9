"""Lanes and pools at AWS's quotas, in the in-memory AWS: twenty lanes, an urgent lane, a rate-capped lane.

Deployed as the template deploys them (the schedule every minute, ends in batches from
the end-event queue, the template's settings, ``LANES`` naming every lane), on the
unchanged tick service in virtual time, with section 8's lag, latency and quotas:

- **twenty lanes in four pools**: one state machine each, five lanes a pool of MAX 750
  (3,000 in all), jobs of 5–15 s, every queue kept 300 jobs deep. Every pool's cap is
  checked by the world at each start; a job started twice or deleted unstarted is counted.
- **priority**: a backfill keeps a pool of MAX 200 full; an urgent lane (priority 1) gets a
  job every 2 s on average; each urgent job's wait from its send to its start.
- **rate**: a lane of 2 starts a second in a pool of its own (MAX 100: the rate binds,
  not the slots), its queue never empty, beside a backfill that keeps pool default full;
  its starts a second, and the most it made in any window of t seconds against ``b + r·t``.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchmarks import full_scale
from dispatcher.core import rate
from dispatcher.core.topology import DEFAULT
from tests.support.rate_bound import worst_window_excess
from tests.support.sim.aws import InMemoryAws, SimLane
from tests.support.sim.function import EventSourceMapping, Function, counted_logs

POOLS = ("default", "glue", "partner", "database")
LANES_A_POOL = 5
POOL_MAX = 750
WAITING_A_LANE = 300
GROUPS_A_LANE = 100
PRIORITY_POOL_MAX = 200
URGENT_EVERY_SECONDS = 2.0
RATE = 2.0
PACED_POOL_MAX = 100
"""The rate lane's own pool: at 2 starts a second of 5–15 s jobs, about 20 run, so the rate binds."""


def twenty_lanes() -> list[SimLane]:
    """Lanes 1–19 (lane ``default`` is the 20th): five a pool, each with its own state machine."""
    return [
        SimLane(f"lane-{index}", pool=POOLS[index // LANES_A_POOL])
        for index in range(1, len(POOLS) * LANES_A_POOL)
    ]


def _body(rng: random.Random, lane: str, job: int) -> str:
    seconds = round(rng.uniform(full_scale.SHORTEST, full_scale.LONGEST), 3)
    return json.dumps({"lane": lane, "job": job, "seconds": seconds})


def keep_backlogs(aws: InMemoryAws, lanes: Sequence[str], waiting: int, until: float) -> None:
    """A producer per lane that keeps ``waiting`` jobs queued, checked every second."""
    rng = random.Random(11)
    sent: Counter[str] = Counter()

    def top_up() -> None:
        for lane in lanes:
            queue = aws.lane_queues[lane]
            visible, _ = queue.depth()
            for _ in range(waiting - visible):
                job = sent[lane]
                sent[lane] += 1
                queue.send(_body(rng, lane, job), f"g{job % GROUPS_A_LANE}")
        if aws.scheduler.now + 1 < until:
            aws.scheduler.call_at(aws.scheduler.now + 1, top_up)

    top_up()


def _deploy(aws: InMemoryAws, default_max: int) -> Function:
    settings = full_scale.template_settings(aws).model_copy(
        update={"max_concurrency": default_max, "lanes": aws.lanes_document()}
    )
    aws.cap_pools(default_max)
    return Function(aws, settings, mapping=EventSourceMapping())


def _safety(aws: InMemoryAws) -> dict[str, int]:
    """Jobs started twice, and jobs deleted from their queue without a start (nothing goes to a DLQ here)."""
    started = Counter(
        (job["lane"], job["job"]) for job in (json.loads(execution.input) for execution in aws.started())
    )
    by_lane = Counter(lane for lane, _ in started)
    lost = sum(max(0, queue.deleted - by_lane[lane]) for lane, queue in aws.lane_queues.items())
    return {
        "duplicated": sum(count - 1 for count in started.values()),
        "lost": lost,
        "dead_letters": len(aws.dead_letters.letters),
    }


def run(region: str, seconds: float = 600.0) -> dict[str, Any]:
    """Twenty lanes in four pools: warm up, measure ``seconds`` of simulated time; section 8's figures."""
    aws = InMemoryAws(
        region=region,
        lag=full_scale.LAG,
        events=full_scale.EVENTS,
        seed=7,
        lanes=twenty_lanes(),
        pools={pool: POOL_MAX for pool in POOLS if pool != DEFAULT},
    )
    began = aws.scheduler.now
    end = began + full_scale.WARM_UP_SECONDS + seconds
    keep_backlogs(aws, list(aws.lane_queues), WAITING_A_LANE, end)
    function = _deploy(aws, POOL_MAX)
    function.schedule(60.0, until=end)
    full_scale.progress(aws, f"section 9: {region}, twenty lanes", end)
    result = full_scale.measure(aws, function, region, seconds, end)
    starts = [execution for execution in aws.started() if execution.started_at >= result["measured_from"]]
    return {
        **result,
        "design": "batched end events",
        "starts_by_machine": dict(Counter(execution.arn.split(":")[6] for execution in starts)),
        "partitions": {
            "every lane's recent starts and ends": {
                kind: aws.usage.partition_units[(aws.table.partition, kind)]
                for kind in ("WriteRequestUnits", "ReadRequestUnits")
            },
            **result["partitions"],
        },
        "safety": _safety(aws),
    }


def priority_run(seconds: float = 300.0) -> dict[str, Any]:
    """An urgent lane beside a backfill that keeps the pool full: each urgent job's wait to its start."""
    aws = InMemoryAws(
        lag=full_scale.LAG, events=full_scale.EVENTS, seed=8, lanes=[SimLane("urgent", priority=1)]
    )
    began = aws.scheduler.now
    end = began + full_scale.WARM_UP_SECONDS + seconds
    keep_backlogs(aws, [DEFAULT], WAITING_A_LANE, end)
    function = _deploy(aws, PRIORITY_POOL_MAX)
    function.schedule(60.0, until=end)
    rng = random.Random(12)
    urgent = aws.lane_queues["urgent"]
    measured_from = began + full_scale.WARM_UP_SECONDS

    def send_urgent(job: int) -> None:
        urgent.send(_body(rng, "urgent", job), f"u{job}")
        later = aws.scheduler.now + rng.expovariate(1 / URGENT_EVERY_SECONDS)
        if later < end:
            aws.scheduler.call_at(later, lambda: send_urgent(job + 1))

    aws.scheduler.call_at(measured_from, lambda: send_urgent(0))
    with counted_logs("INFO"):
        aws.scheduler.run_until(end + 10)
    aws.scheduler.stop()
    sent = {json.loads(message.body)["job"]: message.sent_at for message in urgent.sent}
    waits = sorted(
        execution.started_at - sent[json.loads(execution.input)["job"]]
        for execution in aws.started()
        if json.loads(execution.input)["lane"] == "urgent"
    )
    full = [len(aws.world.running(moment)) for moment in range(int(measured_from), int(end), 10)]
    return {
        "seconds": seconds,
        "sent": len(sent),
        "started": len(waits),
        "p50": _percentile(waits, 0.50),
        "p95": _percentile(waits, 0.95),
        "max": waits[-1] if waits else math.nan,
        "running_mean": sum(full) / max(1, len(full)),
        "errors": [repr(error) for error in [*function.errors, *aws.scheduler.errors]][:5],
        "violations": aws.world.violations[:5],
        "safety": _safety(aws),
    }


def rate_run(seconds: float = 600.0) -> dict[str, Any]:
    """A lane of 2 starts a second, never short of jobs, in its own pool: its rate and its worst window."""
    aws = InMemoryAws(
        lag=full_scale.LAG,
        events=full_scale.EVENTS,
        seed=9,
        lanes=[SimLane("paced", pool="paced", starts_per_second=RATE)],
        pools={"paced": PACED_POOL_MAX},
    )
    began = aws.scheduler.now
    end = began + full_scale.WARM_UP_SECONDS + seconds
    keep_backlogs(aws, [DEFAULT, "paced"], WAITING_A_LANE, end)
    function = _deploy(aws, PRIORITY_POOL_MAX)
    function.schedule(60.0, until=end)
    with counted_logs("INFO"):
        aws.scheduler.run_until(end)
    aws.scheduler.stop()
    paced = [
        execution.started_at for execution in aws.started() if json.loads(execution.input)["lane"] == "paced"
    ]
    measured = [moment for moment in paced if moment >= began + full_scale.WARM_UP_SECONDS]
    return {
        "seconds": seconds,
        "rate": RATE,
        "burst": rate.burst(RATE),
        "measured_rate": len(measured) / seconds,
        "worst_excess": worst_window_excess(paced, RATE),
        "starts": len(paced),
        "errors": [repr(error) for error in [*function.errors, *aws.scheduler.errors]][:5],
        "violations": aws.world.violations[:5],
        "safety": _safety(aws),
    }


def call(name: str, seconds: float) -> dict[str, Any]:
    """Run ``priority_run`` or ``rate_run`` by name (so both can go to a process pool)."""
    runs = {"priority_run": priority_run, "rate_run": rate_run}
    return runs[name](seconds)


def _percentile(values: Sequence[float], share: float) -> float:
    if not values:
        return math.nan
    return values[min(len(values) - 1, math.ceil(share * len(values)) - 1)]


# -- the report ---------------------------------------------------------------------------


def lines(runs: list[dict[str, Any]], priority: dict[str, Any], paced: dict[str, Any]) -> list[str]:
    """The section: twenty lanes as section 8 reports them, then the priority and the rate figures."""
    say = full_scale.lines(runs)
    say.append(
        "   starts by state machine, lowest and highest: "
        + ", ".join(
            f"{r['region']} {min(r['starts_by_machine'].values()) / r['seconds']:.1f}"
            f"–{max(r['starts_by_machine'].values()) / r['seconds']:.1f}/s"
            for r in runs
        )
    )
    say.append(
        "   lost, duplicated: "
        + ", ".join(f"{r['region']} {r['safety']['lost']}, {r['safety']['duplicated']}" for r in runs)
    )
    say.append("")
    say.append(
        f"   priority: a backfill keeps pool default (MAX {PRIORITY_POOL_MAX}) full"
        f" ({priority['running_mean']:.0f} RUNNING on average); an urgent lane (priority 1) gets a job"
        f" every {URGENT_EVERY_SECONDS:.0f} s on average for {priority['seconds']:.0f} s"
    )
    say.append(
        f"   urgent jobs' wait from send to start: p50 {priority['p50']:.2f} s, p95 {priority['p95']:.2f} s,"
        f" max {priority['max']:.2f} s ({priority['started']} of {priority['sent']} started)"
    )
    say.append(
        f"   rate: a lane of {paced['rate']:.0f} starts/s (burst b = {paced['burst']:.0f}) beside a backfill,"
        f" {paced['seconds']:.0f} s: {paced['measured_rate']:.3f} starts/s; the most any window made over"
        f" r·t: {paced['worst_excess']:.2f} (b = {paced['burst']:.0f})"
    )
    return say


PRIORITY_P95_SECONDS = 2.5
RATE_TOLERANCE = 0.05


def targets(
    runs: list[dict[str, Any]], priority: dict[str, Any], paced: dict[str, Any]
) -> list[tuple[str, bool, str]]:
    """Issue 27's targets: section 8's on twenty lanes, the urgent lane's p95, the rate and its bound."""
    twenty = [
        (f"twenty lanes: {name}", met, figures)
        for name, met, figures in full_scale.targets(runs)
        if "ends per Lambda invocation" not in name
    ]
    unsafe = sum(r["safety"]["lost"] + r["safety"]["duplicated"] for r in [*runs, priority, paced])
    return [
        *twenty,
        ("twenty lanes: 0 lost, 0 duplicated (every run of the section)", unsafe == 0, f"{unsafe}"),
        (
            f"urgent job's wait p95 ≤ {PRIORITY_P95_SECONDS} s (one end's delivery + one tick)",
            priority["p95"] <= PRIORITY_P95_SECONDS and not priority["violations"],
            f"{priority['p95']:.2f} s",
        ),
        (
            f"a lane at {RATE:.0f}/s runs at {RATE:.0f}/s ± {RATE_TOLERANCE:.0%}",
            abs(paced["measured_rate"] - RATE) <= RATE * RATE_TOLERANCE,
            f"{paced['measured_rate']:.3f}/s",
        ),
        (
            "never above b + r·t in any window",
            paced["worst_excess"] <= paced["burst"] + 1e-9,
            f"worst {paced['worst_excess']:.2f} over r·t, b = {paced['burst']:.0f}",
        ),
    ]
