"""Section 12: tenants — one noisy message group beside many quiet ones, at AWS's quotas.

In the in-memory AWS (section 8's: us-east-1 quotas, the template's settings, ends
batched, list lag), one noisy tenant keeps a deep backlog in its message group while quiet
tenants each send a job now and then:

- **long executions**: MAX 3,000, executions of 10 minutes (the noisy tenant's first 3,000
  of 0–10 minutes, so about 5 slots free a second from the start), the noisy tenant with
  100,000 queued, 200 quiet tenants each sending a job every 2 minutes (1.7 a second);
  once with ``fair_share`` (the pool stays full, the noisy tenant takes what the quiet
  ones leave) and once with ``max_per_group`` 100 (the noisy tenant never holds more);
- **short executions, at the quota**: section 8's shape (5–15 s, MAX 3,000) with ``fair_share``,
  the noisy tenant keeping 6,000 queued and 1,000 quiet tenants sending 200 jobs a second
  between them (one each every 5 s), beside the same load with no tenant setting. FIFO
  hands out one group's messages ten at a time and blocks the group while they are in
  flight: one group alone can't fill the quota, and a thousand groups of one job each
  are received ten a call (this shape's ceiling is about 230 starts a second, with or
  without tenants; at 250 quiet jobs a second the queue grows).

A quiet tenant's wait is from its job's send to its execution's start. A held job's
receives are counted at SQS (each hold follows the receive that found its group at its limit).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from benchmarks import billing, full_scale
from benchmarks.gates import percentile
from dispatcher.core.tenants import HOLD_SECONDS
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import EventSourceMapping, Function
from tests.support.sim.sqs import FifoQueue

NOISY = "noisy"
LONG_SECONDS = 600.0
LONG_NOISY = 100_000
LONG_QUIET = 200
LONG_QUIET_EVERY = 120.0
GROUP_LIMIT = 100
SHORT_NOISY_WAITING = 6000
SHORT_QUIET = 1000
SHORT_QUIET_EVERY = 5.0
MEASURED_SECONDS = 900.0
SAMPLE_SECONDS = 1.0
QUIET_P95_SECONDS = 2.5
POOL_FULL_SHARE = 0.99
LISTS_PER_SECOND = 2.0
DESCRIBES_PER_START = 0.02
SHARE_OF_REFILL = 0.9
BILL_PER_MILLION = 1.20
LONG_BILL_PER_MILLION = {"fair_share": 3.00, "max_per_group": 5.00}
"""The long runs' bill targets, their quiet tenants waking (latency bought without a higher bill)."""
WOKEN = ", producers wake"
LONGER_WINDOW_SECONDS = 2.0
"""The long runs again with the end-event mapping gathering ends this long (`EndEventBatchWindow`)."""


def _quiet(  # noqa: PLR0913, PLR0917 — the run, its draws, and the quiet tenants' stream
    aws: InMemoryAws,
    rng: random.Random,
    tenants: int,
    every: float,
    durations: tuple[float, float],
    until: float,
    function: Function | None = None,
) -> None:
    """Each quiet tenant sends a job every ``every`` seconds on average (a Poisson stream each).

    ``function``: each tenant is a producer that wakes it after each send (its own `Waker`).
    """
    wakers = [function.waker() if function is not None else None for _ in range(tenants)]

    def send(tenant: int) -> None:
        body = json.dumps({"tenant": tenant, "seconds": round(rng.uniform(*durations), 3)})
        aws.queue.send(body, f"quiet-{tenant}")
        waker = wakers[tenant]
        if waker is not None:
            waker.wake()
        later = aws.scheduler.now + rng.expovariate(1 / every)
        if later < until:
            aws.scheduler.call_at(later, lambda: send(tenant))

    for tenant in range(tenants):
        aws.scheduler.call_at(aws.scheduler.now + rng.uniform(0, every), lambda tenant=tenant: send(tenant))


def _count_holds(queue: FifoQueue) -> Counter[str]:
    """Count each message's holds (its visibility set to `HOLD_SECONDS`): message id → holds."""
    holds: Counter[str] = Counter()
    hide = queue.hide

    def counted(receipt: str, seconds: float) -> bool:
        message = queue._in_flight.get(receipt)  # the ground truth's own index
        if message is not None and seconds >= HOLD_SECONDS:
            holds[message.message_id] += 1
        return hide(receipt, seconds)

    queue.hide = counted  # type: ignore[method-assign]
    return holds


def _sample(aws: InMemoryAws, until: float) -> list[tuple[int, int]]:
    """(RUNNING, of them the noisy tenant's) every `SAMPLE_SECONDS`, by the ground truth."""
    samples: list[tuple[int, int]] = []
    noisy: dict[str, bool] = {}

    def take() -> None:
        running = aws.world.running()
        count = 0
        for execution in running:
            if execution.arn not in noisy:
                noisy[execution.arn] = "tenant" not in json.loads(execution.input)
            count += noisy[execution.arn]
        samples.append((len(running), count))
        if aws.scheduler.now + SAMPLE_SECONDS < until:
            aws.scheduler.call_at(aws.scheduler.now + SAMPLE_SECONDS, take)

    aws.scheduler.call_at(aws.scheduler.now + full_scale.WARM_UP_SECONDS, take)
    return samples


def _offered(aws: InMemoryAws, measured_from: float) -> dict[str, int]:
    """What the load offered in the measured time: quiet jobs sent, and the noisy tenant's jobs started."""
    sent = {message.message_id: message for message in aws.queue.sent}
    noisy_starts = sum(
        1
        for execution in aws.started()
        if execution.started_at >= measured_from and sent[execution.name].group == NOISY
    )
    quiet_sent = sum(
        1 for message in aws.queue.sent if message.group != NOISY and message.sent_at >= measured_from
    )
    return {"quiet_sent": quiet_sent, "noisy_starts": noisy_starts}


def _waits(aws: InMemoryAws, measured_from: float) -> list[float]:
    """Each quiet job started in the measured time: its wait from send to start."""
    sent = {message.message_id: message for message in aws.queue.sent}
    return [
        execution.started_at - sent[execution.name].sent_at
        for execution in aws.started()
        if execution.started_at >= measured_from and sent[execution.name].group != NOISY
    ]


def long_run(
    mode: str, seconds: float = MEASURED_SECONDS, window: float = 1.0, *, wakes: bool = False
) -> dict[str, Any]:
    """Executions of 10 minutes at MAX 3,000: ``mode`` "fair_share" or "max_per_group".

    ``window``: how long the end-event mapping gathers ends (the template's default, 1 s).
    ``wakes``: each quiet tenant wakes the dispatcher after each send (DESIGN.md "Start on arrival").
    """
    aws = InMemoryAws(region="us-east-1", lag=full_scale.LAG, events=full_scale.EVENTS, seed=21)
    aws.world.max_concurrency = full_scale.MAX_CONCURRENCY
    rng = random.Random(21)
    end = aws.scheduler.now + full_scale.WARM_UP_SECONDS + seconds
    for job in range(LONG_NOISY):
        duration = rng.uniform(0, LONG_SECONDS) if job < full_scale.MAX_CONCURRENCY else LONG_SECONDS
        aws.queue.send(json.dumps({"job": job, "seconds": round(duration, 3)}), NOISY)
    tenants = {"fair_share": True} if mode == "fair_share" else {"max_per_group": GROUP_LIMIT}
    settings = full_scale.template_settings(aws).model_copy(update=tenants)
    function = Function(aws, settings, mapping=EventSourceMapping(window_seconds=window))
    _quiet(
        aws, rng, LONG_QUIET, LONG_QUIET_EVERY, (LONG_SECONDS, LONG_SECONDS), end, function if wakes else None
    )
    holds = _count_holds(aws.queue)
    samples = _sample(aws, end)
    function.schedule(60.0, until=end)
    design = mode if window == 1.0 else f"{mode}, ends gathered for {window:g} s"
    design += WOKEN if wakes else ""
    full_scale.progress(aws, f"section 12: long executions, {design}", end)
    result = full_scale.measure(aws, function, "us-east-1", seconds, end)
    held = list(holds.values())
    return {
        **result,
        "design": design,
        "window": window,
        "wakes": function.wakes_sent,
        "quiet_waits": _waits(aws, result["measured_from"]),
        "running": [running for running, _ in samples],
        "noisy_running": [noisy for _, noisy in samples],
        "held_jobs": len(held),
        "holds_per_job": max(held, default=0),
    }


def short_run(seconds: float = MEASURED_SECONDS, *, fair: bool = True) -> dict[str, Any]:
    """Section 8's shape: the noisy tenant keeps 6,000 queued, 1,000 quiet ones send a job every 5 s each.

    ``fair``: with fair share (else the baseline beside it: the same load, no tenant setting).
    """
    aws = InMemoryAws(region="us-east-1", lag=full_scale.LAG, events=full_scale.EVENTS, seed=22)
    aws.world.max_concurrency = full_scale.MAX_CONCURRENCY
    rng = random.Random(22)
    end = aws.scheduler.now + full_scale.WARM_UP_SECONDS + seconds
    durations = (full_scale.SHORTEST, full_scale.LONGEST)
    sequence = {"next": 0}

    def top_up() -> None:
        for _ in range(SHORT_NOISY_WAITING - aws.queue.waiting_in(NOISY)):
            sequence["next"] += 1
            body = json.dumps({"job": sequence["next"], "seconds": round(rng.uniform(*durations), 3)})
            aws.queue.send(body, NOISY)
        if aws.scheduler.now + 1 < end:
            aws.scheduler.call_at(aws.scheduler.now + 1, top_up)

    top_up()
    _quiet(aws, rng, SHORT_QUIET, SHORT_QUIET_EVERY, durations, end)
    samples = _sample(aws, end)
    settings = full_scale.template_settings(aws).model_copy(update={"fair_share": fair})
    function = Function(aws, settings, mapping=EventSourceMapping())
    function.schedule(60.0, until=end)
    design = "short, fair_share" if fair else "short, no tenant setting (the baseline)"
    full_scale.progress(aws, f"section 12: {design}", end)
    result = full_scale.measure(aws, function, "us-east-1", seconds, end)
    return {
        **result,
        **_offered(aws, result["measured_from"]),
        "design": design,
        "quiet_waits": _waits(aws, result["measured_from"]),
        "running": [running for running, _ in samples],
        "noisy_running": [noisy for _, noisy in samples],
    }


def call(name: str, seconds: float) -> dict[str, Any]:
    """Run one of the section's runs by name (a worker process takes a picklable call).

    "fair_share" and "max_per_group" are the long runs; with " 2 s" after the name, the
    end-event mapping gathers ends for `LONGER_WINDOW_SECONDS`; with " wakes", the quiet
    tenants wake the dispatcher.
    """
    if name in {"short", "short baseline"}:
        return short_run(seconds, fair=name == "short")
    mode, _, option = name.partition(" ")
    return long_run(mode, seconds, LONGER_WINDOW_SECONDS if option == "2 s" else 1.0, wakes=option == "wakes")


# -- the report ---------------------------------------------------------------------------


def _p95(values: list[float]) -> float:
    return percentile(values, 0.95) if values else float("nan")


def lines(runs: list[dict[str, Any]]) -> list[str]:
    """Per run: the quiet tenants' waits, RUNNING and the noisy tenant's share, holds, reads, the bill."""
    say = []
    designs = {run["design"] for run in runs}
    both = {"short, fair_share", "short, no tenant setting (the baseline)"} <= designs
    load = offered(runs)[0] if both else None
    for run in runs:
        calls, seconds, starts = run["calls"], run["seconds"], max(1, run["starts"])
        waits, running, noisy = run["quiet_waits"], run["running"], run["noisy_running"]
        say.append(f"   {run['design']}:")
        say.append(
            f"     quiet wait p50 {percentile(waits, 0.5):.2f} s, p95 {_p95(waits):.2f} s,"
            f" max {max(waits, default=0):.2f} s"
            f" of {len(waits):,}; starts {run['starts'] / seconds:.1f}/s"
            + (f" (the load offers {load:.1f}/s)" if load is not None and "quiet_sent" in run else "")
        )
        say.append(
            f"     RUNNING mean {sum(running) / max(1, len(running)):,.0f}, min {min(running, default=0):,}"
            f" of {full_scale.MAX_CONCURRENCY:,}; the noisy tenant's max {max(noisy, default=0):,},"
            f" mean {sum(noisy) / max(1, len(noisy)):,.0f}; {run['invocations']:,} invocations"
            f" ({run['busy']:,} found the lease held)"
            + (f", {run['wakes']:,} wakes" if run.get("wakes") else "")
        )
        say.append(
            f"     ListExecutions {calls.get('ListExecutions', 0) / seconds:.2f}/s, DescribeExecution"
            f" {calls.get('DescribeExecution', 0) / starts:.4f}/start, bill"
            f" ${billing.total(run):.2f}/M,"
            f" {len(run['violations'])} over the cap, {len(run['errors'])} errors"
            + (
                f"; {run['held_jobs']:,} jobs held, at most {run['holds_per_job']} hold(s) each"
                if "held_jobs" in run
                else ""
            )
        )
    return say


def offered(runs: list[dict[str, Any]]) -> tuple[float, float, float]:
    """What the short load offers a second: (in all, the quiet tenants' sends, the noisy group's ceiling).

    FIFO hands out one group's messages ten at a time, and none while they are in flight:
    the noisy group alone can't fill the quota. Its ceiling is what it started in the
    baseline run (the same load, nothing but FIFO holding it back); the quiet tenants offer
    what they sent.
    """
    short, baseline = (
        next(run for run in runs if run["design"] == name)
        for name in ("short, fair_share", "short, no tenant setting (the baseline)")
    )
    quiet = short["quiet_sent"] / short["seconds"]
    noisy = baseline["noisy_starts"] / baseline["seconds"]
    return quiet + noisy, quiet, noisy


def targets(runs: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """The issue's targets, each with its figures."""
    fair, limited, short = (
        next(run for run in runs if run["design"] == name)
        for name in ("fair_share" + WOKEN, "max_per_group" + WOKEN, "short, fair_share")
    )

    def mean(values: list[int]) -> float:
        return sum(values) / max(1, len(values))

    quota = short["quotas"]["StartExecution"]
    load, quiet, noisy = offered(runs)
    short_rate = short["starts"] / short["seconds"]
    short_share = short_rate / min(quota, load)
    short_bill = billing.total(short)
    long_bills = {
        mode: billing.total(run) for mode, run in (("fair_share", fair), ("max_per_group", limited))
    }
    long_runs = (fair, limited)
    hours = max(run["seconds"] for run in long_runs) / 3600
    allowed_holds = 1 + int(hours * 3600 // HOLD_SECONDS)
    return [
        (
            f"long, fair_share, producers wake: a quiet tenant's wait p95 ≤ {QUIET_P95_SECONDS} s,"
            f" the pool full (mean ≥ {POOL_FULL_SHARE:.0%})",
            _p95(fair["quiet_waits"]) <= QUIET_P95_SECONDS
            and mean(fair["running"]) >= POOL_FULL_SHARE * full_scale.MAX_CONCURRENCY,
            f"p95 {_p95(fair['quiet_waits']):.2f} s, RUNNING mean {mean(fair['running']):,.0f}",
        ),
        (
            f"long, max_per_group {GROUP_LIMIT}, producers wake: the noisy tenant never above it,"
            f" a quiet wait p95 ≤ {QUIET_P95_SECONDS} s",
            max(limited["noisy_running"], default=0) <= GROUP_LIMIT
            and _p95(limited["quiet_waits"]) <= QUIET_P95_SECONDS,
            f"noisy max {max(limited['noisy_running'], default=0)}, p95 {_p95(limited['quiet_waits']):.2f} s",
        ),
        (
            "held receives ≤ 1 per 4 hours per held job",
            limited["holds_per_job"] <= allowed_holds and limited["held_jobs"] > 0,
            f"{limited['held_jobs']:,} held, at most {limited['holds_per_job']} receive(s) while held"
            f" in {limited['seconds']:.0f} s",
        ),
        (
            f"long: ListExecutions ≤ {LISTS_PER_SECOND}/s,"
            f" DescribeExecution ≤ {DESCRIBES_PER_START} per start",
            all(
                run["calls"].get("ListExecutions", 0) / run["seconds"] <= LISTS_PER_SECOND
                and run["calls"].get("DescribeExecution", 0) / max(1, run["starts"]) <= DESCRIBES_PER_START
                for run in long_runs
            ),
            ", ".join(
                f"{run['design']} {run['calls'].get('ListExecutions', 0) / run['seconds']:.2f}/s,"
                f" {run['calls'].get('DescribeExecution', 0) / max(1, run['starts']):.4f}"
                for run in long_runs
            ),
        ),
        (
            f"short, fair_share: ≥ {SHARE_OF_REFILL:.0%} of what the load offers (within the quota)",
            short_share >= SHARE_OF_REFILL,
            f"{short_share:.1%}: {short_rate:.1f}/s of {load:.1f}/s (quiet {quiet:.1f}/s sent, the noisy"
            f" group's FIFO ceiling {noisy:.1f}/s; StartExecution's refill {quota:.0f}/s)",
        ),
        (
            f"short: bill ≤ ${BILL_PER_MILLION:.2f} per million",
            short_bill <= BILL_PER_MILLION,
            f"${short_bill:.2f}",
        ),
        (
            "long runs: bill ≤ "
            + ", ".join(
                f"${bill:.2f} per million with {mode}" for mode, bill in LONG_BILL_PER_MILLION.items()
            ),
            all(bill <= LONG_BILL_PER_MILLION[mode] for mode, bill in long_bills.items()),
            ", ".join(f"{mode} ${bill:.2f}" for mode, bill in long_bills.items()),
        ),
        (
            f"short: a quiet tenant's wait p95 ≤ {QUIET_P95_SECONDS} s",
            _p95(short["quiet_waits"]) <= QUIET_P95_SECONDS,
            f"p95 {_p95(short['quiet_waits']):.2f} s",
        ),
        (
            "the cap held, no error",
            not any(run["violations"] or run["errors"] for run in runs),
            f"{sum(len(run['violations']) for run in runs)} over the cap",
        ),
    ]
