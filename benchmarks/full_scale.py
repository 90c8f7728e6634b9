"""At AWS's quotas, full scale: MAX 3,000, jobs of 5–15 s, a backlog that never drains, in the in-memory AWS.

The unchanged tick service runs on the in-memory AWS (tests/support/sim) in virtual time,
deployed as the template deploys it: the schedule every minute, refill on completion
(an invocation per end event, delivered 0–1 s after the end), the template's settings,
a warm container per concurrent invocation. Every call costs 20 ms and a token of its
API's bucket, with the quotas of us-east-1 or of the other regions; botocore's standard
retries. `ListExecutions` may omit a new execution for up to 1 s and keep an ended one
for up to 5 s; `DescribeExecution` may miss a new one for up to 1 s. A producer keeps
6,000 jobs waiting in 100 message groups. After a minute of warm-up, ten minutes are
measured. Not simulated: the tick's own CPU time (durations are waiting time), Lambda's
concurrency limit, and anyone else's calls on the account's quotas.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from typing import Any

from benchmarks.billing import SQS_OPERATIONS, bill
from dispatcher.core import quotas
from dispatcher.core.messages import START_BY_ATTRIBUTE
from dispatcher.core.rerun import iso
from dispatcher.core.topology import DEFAULT
from dispatcher.settings import Settings
from dispatcher.waking import Waker
from tests.support.plans import EventPlan, Lag
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import MEMORY_MB, EventSourceMapping, Function, counted_logs

MAX_CONCURRENCY = 3000
SHORTEST, LONGEST = 5.0, 15.0
GROUPS = 100
WAITING = 6000
WARM_UP_SECONDS = 60.0
REGIONS = {"us-east-1": "us-east-1, us-west-2, eu-west-1", "eu-central-1": "every other region"}
LAG = Lag(start=1.0, end=5.0, describe=1.0)
EVENTS = EventPlan(enabled=True, delay=1.0)
TIMELINE_SECONDS = 5.0
"""The plot's starts/s are averaged over this long."""
DESIGNS = {
    "an invocation per end event": "per event (0.5)",
    "batched end events": "batched (0.6)",
    "batched end events, the producer wakes": "batched, waking",
}
WAKING_WITHIN = 0.02
"""With a producer that wakes: calls per start and the bill within this share of the batched run's."""
"""Each design's column head: the ends' path up to 0.5, and the template's since."""
PROGRESS_SECONDS = 60.0
"""A run says how far it is on stderr every this many simulated seconds (a run takes minutes)."""


def template_settings(aws: InMemoryAws) -> Settings:
    """The function's settings as the template sets them (refill on completion, the control parameter)."""
    return Settings(
        queue_url=aws.queue.url,
        dead_letter_queue_url="dead-letters.fifo",
        state_machine_arn=aws.state_machine_arn,
        max_concurrency=MAX_CONCURRENCY,
        state_table="state",
        receive_wait_seconds=1,
        time_margin_seconds=15,
        start_concurrency=0,
        list_reuse_seconds=1,
        loop_seconds=0,
        control_parameter="/dispatcher/control",
    )


FOLLOWED_SHARE = 100
"""With ``follow``: one job in this many is cancelled by its producer, and one more carries a
``StartBy`` that has passed when it is received."""


def keep_backlog(  # noqa: PLR0913 — the run, its draws, and the producer's options
    aws: InMemoryAws,
    rng: random.Random,
    until: float,
    durations: tuple[float, float] = (SHORTEST, LONGEST),
    *,
    follow: bool = False,
    waker: Waker | None = None,
) -> None:
    """A producer that keeps ``WAITING`` jobs queued, checked every second, each running ``durations`` s.

    ``follow``: 1 % of the jobs cancelled as they are sent, and 1 % with a deadline already
    passed (section 13). ``waker``: the producer wakes the dispatcher after each top-up that
    queued jobs (as the client does after a send: at most once a second).
    """
    sequence = {"next": 0}

    def top_up() -> None:
        visible, _ = aws.queue.depth()
        for _ in range(WAITING - visible):
            job = sequence["next"]
            sequence["next"] += 1
            body = json.dumps({"job": job, "seconds": round(rng.uniform(*durations), 3)})
            expiring = follow and job % FOLLOWED_SHARE == FOLLOWED_SHARE // 2
            attributes = {
                START_BY_ATTRIBUTE: {"DataType": "String", "StringValue": iso(aws.scheduler.now - 1)}
            }
            message = aws.queue.send(body, f"g{job % GROUPS}", attributes=attributes if expiring else None)
            if follow and job % FOLLOWED_SHARE == 0:
                aws.jobs.cancel(DEFAULT, message.message_id)
        if waker is not None and visible < WAITING:
            waker.wake()
        if aws.scheduler.now + 1 < until:
            aws.scheduler.call_at(aws.scheduler.now + 1, top_up)

    top_up()


def run(  # noqa: PLR0913 — the region, the length, and each variant of the run
    region: str,
    seconds: float = 600.0,
    mapping: EventSourceMapping | None = None,
    *,
    follow: bool = False,
    wakes: bool = False,
    cancelled_up_front: int = 0,
) -> dict[str, Any]:
    """Warm up, then measure ``seconds`` of simulated time in ``region``; the figures.

    ``mapping``: ends reach the function in batches through the end-event queue (the
    template since 0.6); None: one invocation per end event (0.5). ``follow``: 1 % of the
    jobs cancelled, 1 % expired (`keep_backlog`). ``wakes``: the producer wakes the
    dispatcher after each top-up (DESIGN.md "Start on arrival"; needs ``mapping``).
    ``cancelled_up_front``: that many names of jobs never sent are cancelled before the run
    (what every tick then reads with its window).
    """
    aws = InMemoryAws(region=region, lag=LAG, events=EVENTS, seed=7)
    aws.world.max_concurrency = MAX_CONCURRENCY
    for index in range(cancelled_up_front):
        aws.jobs.cancel(DEFAULT, f"never-sent-{index:05d}")
    began = aws.scheduler.now
    end = began + WARM_UP_SECONDS + seconds
    function = Function(aws, template_settings(aws), mapping=mapping)
    keep_backlog(aws, random.Random(7), end, follow=follow, waker=function.waker() if wakes else None)
    function.schedule(60.0, until=end)
    design = "batched end events" if mapping else "an invocation per end event"
    design += ", 1 % cancelled and 1 % expired" if follow else ""
    design += ", the producer wakes" if wakes else ""
    design += f", {cancelled_up_front:,} cancelled by name up front" if cancelled_up_front else ""
    progress(aws, f"section 8: {region}, {design}", end)
    result = measure(aws, function, region, seconds, end)
    timeline = Counter(int((execution.started_at - began) // TIMELINE_SECONDS) for execution in aws.started())
    return {
        **result,
        "design": design,
        "partitions": {
            "recent starts and ends": {
                kind: aws.usage.partition_units[(aws.table.partition, kind)]
                for kind in ("WriteRequestUnits", "ReadRequestUnits")
            },
            **result["partitions"],
        },
        "timeline_seconds": TIMELINE_SECONDS,
        "warm_up_seconds": WARM_UP_SECONDS,
        "timeline": [
            timeline[index] / TIMELINE_SECONDS
            for index in range(int((WARM_UP_SECONDS + seconds) // TIMELINE_SECONDS))
        ],
    }


def measure(aws: InMemoryAws, function: Function, region: str, seconds: float, end: float) -> dict[str, Any]:
    """Warm up for a minute, then measure until ``end``: the figures every full-scale run reports."""
    began = aws.scheduler.now
    with counted_logs("INFO") as logs:
        aws.scheduler.run_until(began + WARM_UP_SECONDS)
        aws.usage.reset()
        function.end_queue_requests.clear()
        ends_before = function.ends_delivered
        logged_before, invocations_before = logs.bytes, len(function.invocations)
        measured_from = aws.scheduler.now
        aws.scheduler.run_until(end)
        logged = logs.bytes - logged_before
    aws.scheduler.stop()
    invocations = [run for run in function.invocations[invocations_before:] if run.began >= measured_from]
    starts = [execution for execution in aws.started() if execution.started_at >= measured_from]
    per_second = Counter(int(run.began - measured_from) for run in invocations)
    reports = [run.report for run in invocations if run.report is not None]
    return {
        "region": region,
        "seconds": seconds,
        "measured_from": measured_from,
        "end_queue_requests": dict(function.end_queue_requests),
        "wakes": function.wakes_sent,
        "ends": function.ends_delivered - ends_before,
        "starts": len(starts),
        "calls": dict(aws.usage.calls),
        "throttles": dict(aws.usage.throttles),
        "units": dict(aws.usage.units),
        "partitions": {
            "tick lease": {
                "WriteRequestUnits": aws.usage.partition_units[
                    (aws.table.lease.partition, "WriteRequestUnits")
                ]
            },
        },
        "invocations": len(invocations),
        "busy": sum(report["stopped"] == "busy" for report in reports),
        "cancelled": sum(report.get("cancelled", 0) for report in reports),
        "expired": sum(report.get("expired", 0) for report in reports),
        "schedule_invocations": sum(run.trigger == "schedule" for run in invocations),
        "gb_seconds": sum(run.ended - run.began for run in invocations) * MEMORY_MB / 1024,
        "traces": sum(min(1, count) + 0.05 * max(0, count - 1) for count in per_second.values()),
        "log_bytes": logged,
        "containers": function.containers,
        "errors": [repr(error) for error in [*function.errors, *aws.scheduler.errors]][:5],
        "violations": aws.world.violations[:5],
        "quotas": {operation: bucket.refill for operation, bucket in quotas.step_functions(region).items()},
    }


def progress(aws: InMemoryAws, label: str, end: float) -> None:
    """Say on stderr, every `PROGRESS_SECONDS` of simulated time, how far this run is and its wall time."""
    began, wall = aws.scheduler.now, time.monotonic()
    total = end - began

    def say() -> None:
        print(  # the benchmark's progress, on stderr (the report is on stdout)
            f"{label}: {aws.scheduler.now - began:.0f} of {total:.0f} s simulated"
            f" ({time.monotonic() - wall:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        if aws.scheduler.now + PROGRESS_SECONDS <= end:
            aws.scheduler.call_at(aws.scheduler.now + PROGRESS_SECONDS, say)

    aws.scheduler.call_at(began + PROGRESS_SECONDS, say)


# -- the report ---------------------------------------------------------------------------


def lines(results: list[dict[str, Any]]) -> list[str]:
    """The section's report: one column per set of quotas."""
    from benchmarks import prices  # noqa: PLC0415

    width = 24
    write, read = "WriteRequestUnits", "ReadRequestUnits"
    say = [
        f"   {'':<44}" + "".join(f"{result['region'] + ' quotas':>{width}}" for result in results),
        f"   {'':<44}" + "".join(f"{DESIGNS[result['design']]:>{width}}" for result in results),
    ]

    def row(label: str, cells: list[str]) -> None:
        say.append(f"   {label:<44}" + "".join(f"{cell:>{width}}" for cell in cells))

    def rate(result: dict[str, Any], count: float) -> float:
        return count / result["seconds"]

    row(
        "sustained starts/s (of StartExecution's refill)",
        [
            f"{rate(r, r['starts']):.1f} of {r['quotas']['StartExecution']:.0f} "
            f"({rate(r, r['starts']) / r['quotas']['StartExecution']:.0%})"
            for r in results
        ],
    )
    row(
        "Lambda invocations/s (busy: found the lease held)",
        [
            f"{rate(r, r['invocations']):.1f} ({r['busy'] / max(1, r['invocations']):.0%} busy)"
            for r in results
        ],
    )
    row(
        "ends per Lambda invocation",
        [f"{r['ends'] / max(1, r['invocations']):.1f}" for r in results],
    )
    row(
        "DynamoDB write units per start",
        [f"{r['units'].get('WriteRequestUnits', 0) / max(1, r['starts']):.2f}" for r in results],
    )
    say.append("   calls/s against each quota (throttled calls); DynamoDB's quota is per partition, in units")
    operations = sorted({operation for r in results for operation in r["calls"]})
    for operation in operations:
        cells = []
        for r in results:
            quota = r["quotas"].get(operation)
            if quota is None and operation in SQS_OPERATIONS:
                quota = quotas.SQS_FIFO_CALLS_PER_ACTION.refill
            if quota is None and operation == "GetParameter":
                quota = quotas.SSM_GET_PARAMETER.refill
            of = f" / {quota:.0f}" if quota is not None else ""
            cells.append(
                f"{rate(r, r['calls'].get(operation, 0)):.2f}{of} ({r['throttles'].get(operation, 0)})"
            )
        row(f"  {operation}", cells)
    for name in results[0]["partitions"]:
        for kind, quota in (
            (write, quotas.DYNAMODB_PARTITION_WRITES),
            (read, quotas.DYNAMODB_PARTITION_READS),
        ):
            if kind in results[0]["partitions"][name]:
                label = f"  {'write' if kind == write else 'read'} units/s, {name}"
                row(
                    label,
                    [f"{rate(r, r['partitions'][name][kind]):.0f} / {quota.refill:.0f}" for r in results],
                )
    say.append(
        "   the dispatcher's bill per million executions (us-east-1 list prices, benchmarks/prices.py)"
    )
    bills = [bill(r) for r in results]
    for index, (label, _) in enumerate(bills[0]):
        row(f"  {label}", [f"${lines_[index][1]:.2f}" for lines_ in bills])
    workflow = 2 * prices.STEP_FUNCTIONS_TRANSITION * prices.PER_MILLION
    row("  total", [f"${sum(cost for _, cost in lines_):.2f}" for lines_ in bills])
    row("  (a 2-transition STANDARD workflow itself)", [f"${workflow:.2f}" for _ in results])
    problems = [
        f"{r['region']}: {r['errors'] or ''} {r['violations'] or ''}"
        for r in results
        if r["errors"] or r["violations"]
    ]
    say += [f"   ! {problem}" for problem in problems]
    return say


# -- the targets (issue 16), checked on the template's design ----------------------------

SHARE_OF_REFILL = 0.90
DESCRIBES_PER_START = 0.02
LISTS_PER_SECOND = 2.0
THROTTLED_SHARE = 0.01
ENDS_PER_INVOCATION = 50
BILL_PER_MILLION = 1.00


def targets(results: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """Each target of the section: (name, met, the figures), on the batched runs of both sets of quotas."""
    batched = [r for r in results if r["design"] == "batched end events"]

    def each(measure: Any, fmt: str) -> str:
        return ", ".join(f"{r['region']} {fmt.format(measure(r))}" for r in batched)

    def share(r: dict[str, Any]) -> float:
        return r["starts"] / r["seconds"] / r["quotas"]["StartExecution"]

    def describes(r: dict[str, Any]) -> float:
        return r["calls"].get("DescribeExecution", 0) / max(1, r["starts"])

    def lists(r: dict[str, Any]) -> float:
        return r["calls"].get("ListExecutions", 0) / r["seconds"]

    def throttled(r: dict[str, Any]) -> float:
        return max(
            (r["throttles"].get(op, 0) / calls for op, calls in r["calls"].items() if calls), default=0.0
        )

    def ends(r: dict[str, Any]) -> float:
        return r["ends"] / max(1, r["invocations"])

    def total(r: dict[str, Any]) -> float:
        return sum(cost for _, cost in bill(r))

    def safe(r: dict[str, Any]) -> int:
        return len(r["violations"]) + len(r["errors"])

    return [
        *_waking_targets(results),
        (
            f"sustained starts ≥ {SHARE_OF_REFILL:.0%} of StartExecution's refill",
            all(share(r) >= SHARE_OF_REFILL for r in batched),
            each(share, "{:.1%}"),
        ),
        (
            f"DescribeExecution ≤ {DESCRIBES_PER_START} per start",
            all(describes(r) <= DESCRIBES_PER_START for r in batched),
            each(describes, "{:.4f}"),
        ),
        (
            f"ListExecutions ≤ {LISTS_PER_SECOND:.0f}/s",
            all(lists(r) <= LISTS_PER_SECOND for r in batched),
            each(lists, "{:.2f}/s"),
        ),
        (
            f"throttled ≤ {THROTTLED_SHARE:.0%} of each API's calls",
            all(throttled(r) <= THROTTLED_SHARE for r in batched),
            each(throttled, "{:.2%} at most"),
        ),
        (
            f"≥ {ENDS_PER_INVOCATION} ends per Lambda invocation",
            all(ends(r) >= ENDS_PER_INVOCATION for r in batched),
            each(ends, "{:.0f}"),
        ),
        (
            f"the dispatcher's bill ≤ ${BILL_PER_MILLION:.2f} per million executions",
            all(total(r) <= BILL_PER_MILLION for r in batched),
            each(total, "${:.2f}"),
        ),
        (
            "the cap held, nothing lost or started twice",
            all(safe(r) == 0 for r in results),
            f"{sum(safe(r) for r in results)} violations or errors in {len(results)} runs",
        ),
    ]


def calls_per_start(result: dict[str, Any]) -> float:
    """Every AWS request a start costs: the dispatcher's, and the end-event queue's (ends, wakes, batches)."""
    requests = sum(result["calls"].values()) + sum(result["end_queue_requests"].values())
    return requests / max(1, result["starts"])


def _waking_targets(results: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """With a producer that wakes: calls per start and the bill beside the same run without (us-east-1)."""
    waking = [r for r in results if r["design"].endswith("the producer wakes")]
    if not waking:
        return []
    [woken] = waking
    [plain] = [r for r in results if r["design"] == "batched end events" and r["region"] == woken["region"]]

    def total(r: dict[str, Any]) -> float:
        return sum(cost for _, cost in bill(r))

    calls = calls_per_start(woken) / calls_per_start(plain) - 1
    bills = total(woken) / total(plain) - 1
    return [
        (
            f"the producer wakes: calls per start and the bill within {WAKING_WITHIN:.0%}"
            " of the batched run's",
            abs(calls) <= WAKING_WITHIN and abs(bills) <= WAKING_WITHIN,
            f"{woken['region']}: calls per start {calls_per_start(woken):.3f} against"
            f" {calls_per_start(plain):.3f} ({calls:+.2%}), bill ${total(woken):.3f} against"
            f" ${total(plain):.3f} ({bills:+.2%}); {woken['wakes']:,} wakes",
        )
    ]


def call_design(region: str, seconds: float, batched: bool, wakes: bool) -> dict[str, Any]:
    """`run` with ends batched or one invocation each, the producer waking or not (for a pool's worker)."""
    return run(region, seconds, EventSourceMapping() if batched else None, wakes=wakes)


def call_run(
    region: str, seconds: float, follow: bool, wakes: bool = False, cancelled_up_front: int = 0
) -> dict[str, Any]:
    """`run` with the template's batched ends, ``follow`` or not, ``wakes`` or not (for a pool's worker)."""
    return run(
        region,
        seconds,
        EventSourceMapping(),
        follow=follow,
        wakes=wakes,
        cancelled_up_front=cancelled_up_front,
    )
