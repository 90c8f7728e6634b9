"""Section 15: start on arrival — a job sent to a quiet dispatcher, and a burst, with wakes and without.

In the in-memory AWS (section 8's: us-east-1 quotas, list lag, events late by up to a
second, the template's settings: the schedule every minute, ends and wakes batched by the
end-event mapping's 1 s window), each run twice, its producers waking (DESIGN.md "Start
on arrival": after each send, at most once a second, through the client's own `Waker` on
the virtual clock) and not:

- **quiet**: the template's MAX (5), 200 jobs, each sent alone after a quiet spell of
  10–120 s (seeded), each running 5–15 s: nothing else runs, nothing else ticks. A job's
  wait is from its send to its execution's start.
- **burst**: 10,000 jobs from 20 producers within a minute (each sends 500 at random
  moments of it, 100 message groups), at section 8's MAX of 3,000 and its 5–15 s jobs,
  beginning half a minute after a scheduled tick.
  The wakes sent, the invocations, and the time from the first send to the last start.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from benchmarks import billing, full_scale
from benchmarks.gates import percentile
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import EventSourceMapping, Function

QUIET_JOBS = 200
QUIET_SPELL = (10.0, 120.0)
QUIET_MAX = 5
"""The template's `MaxConcurrency` default."""
BURST_JOBS = 10_000
BURST_PRODUCERS = 20
BURST_SECONDS = 60.0
BURST_GROUPS = 100
BURST_OFFSET_SECONDS = 30.0
"""The burst begins half a minute after a scheduled tick, not riding one."""
AFTER_SECONDS = 300.0
"""After the last send: time for the last job to start, and for what it woke to end."""
P95_SECONDS = 2.0
MAX_SECONDS = 5.0
WAKES_PER_PRODUCER_SECOND = 1
EXTRA_INVOCATIONS_PER_SECOND = 1.0


def _durations(rng: random.Random) -> float:
    return round(rng.uniform(full_scale.SHORTEST, full_scale.LONGEST), 3)


def _function(aws: InMemoryAws, max_concurrency: int) -> Function:
    settings = full_scale.template_settings(aws).model_copy(update={"max_concurrency": max_concurrency})
    return Function(aws, settings, mapping=EventSourceMapping())


def _waits(aws: InMemoryAws) -> list[float]:
    """Each job started: its wait from send to start."""
    sent = {message.message_id: message for message in aws.queue.sent}
    return [execution.started_at - sent[execution.name].sent_at for execution in aws.started()]


def quiet_run(wakes: bool) -> dict[str, Any]:
    """200 jobs, each alone after a quiet spell of 10–120 s; ``wakes``: the producer wakes after each."""
    aws = InMemoryAws(region="us-east-1", lag=full_scale.LAG, events=full_scale.EVENTS, seed=31)
    aws.world.max_concurrency = QUIET_MAX
    rng = random.Random(31)
    function = _function(aws, QUIET_MAX)
    waker = function.waker()
    scheduler = aws.scheduler
    moment = scheduler.now + full_scale.WARM_UP_SECONDS
    for job in range(QUIET_JOBS):
        moment += rng.uniform(*QUIET_SPELL)
        body = json.dumps({"job": job, "seconds": _durations(rng)})

        def send(body: str = body, job: int = job) -> None:
            aws.queue.send(body, f"quiet-{job}")
            if wakes:
                waker.wake()

        scheduler.call_at(moment, send)
    end = moment + AFTER_SECONDS
    function.schedule(60.0, until=end)
    design = "quiet, producers wake" if wakes else "quiet, no wakes"
    full_scale.progress(aws, f"section 15: {design}", end)
    result = full_scale.measure(
        aws, function, "us-east-1", end - scheduler.now - full_scale.WARM_UP_SECONDS, end
    )
    return {
        **result,
        "design": design,
        "jobs": QUIET_JOBS,
        "waits": _waits(aws),
        "wakes": function.wakes_sent,
    }


def burst_run(wakes: bool) -> dict[str, Any]:
    """10,000 jobs from 20 producers within a minute; ``wakes``: each producer wakes after each send."""
    aws = InMemoryAws(region="us-east-1", lag=full_scale.LAG, events=full_scale.EVENTS, seed=32)
    aws.world.max_concurrency = full_scale.MAX_CONCURRENCY
    rng = random.Random(32)
    function = _function(aws, full_scale.MAX_CONCURRENCY)
    scheduler = aws.scheduler
    began = scheduler.now + full_scale.WARM_UP_SECONDS + BURST_OFFSET_SECONDS
    woken: list[Counter[int]] = [Counter() for _ in range(BURST_PRODUCERS)]
    for producer in range(BURST_PRODUCERS):
        waker = function.waker()
        for job in range(BURST_JOBS // BURST_PRODUCERS):
            body = json.dumps({"producer": producer, "job": job, "seconds": _durations(rng)})
            group = f"burst-{(producer * 7 + job) % BURST_GROUPS}"
            at = began + rng.uniform(0, BURST_SECONDS)

            def send(
                body: str = body, group: str = group, producer: int = producer, waker: Any = waker
            ) -> None:
                aws.queue.send(body, group)
                if wakes and waker.wake():
                    woken[producer][int(scheduler.now - began)] += 1

            scheduler.call_at(at, send)
    end = began + BURST_SECONDS + AFTER_SECONDS
    function.schedule(60.0, until=end)
    design = "burst, producers wake" if wakes else "burst, no wakes"
    full_scale.progress(aws, f"section 15: {design}", end)
    result = full_scale.measure(aws, function, "us-east-1", end - began + BURST_OFFSET_SECONDS, end)
    started = [execution.started_at for execution in aws.started()]
    first_send = min(message.sent_at for message in aws.queue.sent)
    return {
        **result,
        "design": design,
        "jobs": BURST_JOBS,
        "started_all": len(started) == BURST_JOBS,
        "last_start": max(started, default=end) - first_send,
        "waits": _waits(aws),
        "wakes": function.wakes_sent,
        "most_wakes_a_producer_second": max((max(each.values(), default=0) for each in woken), default=0),
    }


def call(name: str) -> dict[str, Any]:
    """Run one of the section's runs by name ("quiet", "quiet wakes", "burst", "burst wakes")."""
    kind, _, woken = name.partition(" ")
    return (quiet_run if kind == "quiet" else burst_run)(bool(woken))


RUNS = ("quiet wakes", "quiet", "burst wakes", "burst")


# -- the report ---------------------------------------------------------------------------


def _spread(waits: list[float]) -> str:
    return (
        f"p50 {percentile(waits, 0.5):.2f} s, p95 {percentile(waits, 0.95):.2f} s,"
        f" max {max(waits, default=0):.2f} s"
    )


def lines(runs: list[dict[str, Any]]) -> list[str]:
    """Per run: the waits, the invocations, the wakes and the bill."""
    say = []
    for run in runs:
        waits = run["waits"]
        say.append(
            f"   {run['design']}: wait from send to start {_spread(waits)}"
            f" ({len(waits):,} of {run['jobs']:,});"
            f" {run['invocations']:,} invocations ({run['invocations'] / run['jobs']:.2f} a job,"
            f" {run['schedule_invocations']} scheduled), {run['wakes']:,} wakes"
            + (
                f"; the last job started {run['last_start']:.1f} s after the first send"
                if "last_start" in run
                else ""
            )
            + f"; bill ${billing.total(run):.2f}/M"
        )
    return say


def targets(runs: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """The issue's targets: the quiet run's waits with wakes; the burst's wakes and invocations."""
    quiet, quiet_plain, burst, burst_plain = (
        next(run for run in runs if run["design"].startswith(name))
        for name in ("quiet, producers", "quiet, no", "burst, producers", "burst, no")
    )
    waits = quiet["waits"]
    extra = burst["invocations"] - burst_plain["invocations"]
    allowed = EXTRA_INVOCATIONS_PER_SECOND * BURST_SECONDS
    return [
        (
            f"quiet, producers wake: send to start p95 ≤ {P95_SECONDS:g} s and max ≤ {MAX_SECONDS:g} s",
            len(waits) == QUIET_JOBS and percentile(waits, 0.95) <= P95_SECONDS and max(waits) <= MAX_SECONDS,
            f"{_spread(waits)}, {quiet['invocations'] / QUIET_JOBS:.2f} invocations a job"
            f" (no wakes: {_spread(quiet_plain['waits'])},"
            f" {quiet_plain['invocations'] / QUIET_JOBS:.2f} a job)",
        ),
        (
            f"burst: wakes ≤ {WAKES_PER_PRODUCER_SECOND} per producer-second",
            burst["most_wakes_a_producer_second"] <= WAKES_PER_PRODUCER_SECOND,
            f"{burst['wakes']:,} wakes from {BURST_PRODUCERS} producers in {BURST_SECONDS:.0f} s,"
            f" at most {burst['most_wakes_a_producer_second']} in a producer's second",
        ),
        (
            f"burst: invocations ≤ those without wakes"
            f" + {EXTRA_INVOCATIONS_PER_SECOND:g} a second of the burst",
            extra <= allowed and burst["started_all"] and burst_plain["started_all"],
            f"{burst['invocations']:,} against {burst_plain['invocations']:,} ({extra:+,}, at most"
            f" {allowed:+,.0f}); the last start {burst['last_start']:.1f} s after the first send"
            f" ({burst_plain['last_start']:.1f} s without wakes)",
        ),
        (
            "the cap held, no error",
            not any(run["violations"] or run["errors"] for run in runs),
            f"{sum(len(run['violations']) for run in runs)} over the cap,"
            f" {sum(len(run['errors']) for run in runs)} errors",
        ),
    ]
