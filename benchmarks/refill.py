"""Refill on completion against schedule only, in real time, with the list lag on.

The emulator ends each execution when its planned duration is over and, when refill
on completion is on, delivers its status change event after a random 0–1 s (the
emulated EventBridge) to the end-event queue, whose event source mapping invokes the
function with batches of them (up to 100, gathered for at most 1 s, as the template).
The function is invoked as deployed: asynchronously, one invocation at a time, by the
schedule (every 60 s) and by those batches.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from statistics import quantiles
from typing import Any

from benchmarks.driver import (
    Clockwork,
    EndEventMapping,
    Lambda,
    dispatcher_environment,
    fresh_stack,
    prepare_process,
    send_backlog,
)
from benchmarks.wire import emulator, fast_sqs
from dispatcher.local.account import pointed_at
from tests.support.plans import EventPlan, Lag
from tests.support.world import World

SCHEDULE_EVENT = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
EVENT_DELAY_SECONDS = 1.0


@dataclass(frozen=True)
class Workload:
    """What runs: MAX, job durations, backlog, how long, and the list lag."""

    max_concurrency: int
    shortest: float
    longest: float
    backlog: int
    groups: int
    seconds: float
    lag: Lag
    latency: float = 0.02
    schedule_seconds: float = 60.0


MODES = {
    (False, False): "schedule only",
    (False, True): "schedule only",
    (True, False): "refill, an invocation an end (0.5)",
    (True, True): "refill, ends batched (the template)",
}
"""How each run delivers ends, by (refill on completion, batched)."""


def run_mode(workload: Workload, refill: bool, batched: bool = True, **settings: Any) -> dict[str, Any]:
    """Run the workload with or without refill on completion; the ground truth of what happened.

    ``batched``: the ends reach the function through the end-event queue's mapping;
    otherwise each end invokes it (the ends' path up to 0.5, still a valid event).
    """
    prepare_process()
    rng = random.Random(7)
    durations = [rng.uniform(workload.shortest, workload.longest) for _ in range(workload.backlog)]
    events = EventPlan(enabled=refill, delay=EVENT_DELAY_SECONDS)
    with (
        fast_sqs(),
        emulator(latency=workload.latency, lag=workload.lag, events=events, seed=7) as emu,
        pointed_at(emu.endpoint_url),
    ):
        stack = fresh_stack("refill" if refill else "schedule")
        send_backlog(stack, workload.backlog, workload.groups, lambda index: {"seconds": durations[index]})
        emu.wire.reset()
        stop = threading.Event()
        with dispatcher_environment(stack, workload.max_concurrency, **settings) as handler:
            began = time.time()
            with (
                Lambda(handler) as function,
                EndEventMapping(function.invoke_async) as mapping,
                Clockwork(emu, mapping.deliver if batched else function.invoke_async),
            ):

                def schedule() -> None:
                    while True:
                        function.invoke_async(SCHEDULE_EVENT)
                        if stop.wait(workload.schedule_seconds):
                            return

                ticker = threading.Thread(target=schedule, daemon=True)
                ticker.start()
                time.sleep(workload.seconds)
                stop.set()
                ticker.join()
            ended = time.time()
        return {
            "refill": refill,
            "batched": batched,
            "began": began,
            "ended": ended,
            **ground_truth(emu.world, began, ended),
            "invocations": function.invocations,
            "dropped": function.dropped,
            "calls": [(at, operation) for at, system, operation in emu.wire.log if system == "dispatcher"],
        }


def ground_truth(world: World, began: float, ended: float) -> dict[str, Any]:
    """Starts and ends of the dispatcher's executions, relative to ``began``."""
    ours = [execution for execution in world.executions.values() if execution.by_dispatcher]
    starts = sorted(execution.started_at - began for execution in ours)
    ends = sorted(
        execution.ended_at - began
        for execution in ours
        if execution.ended_at is not None and execution.ended_at <= ended
    )
    return {"starts": starts, "ends": ends}


def refill_latencies(starts: list[float], ends: list[float], horizon: float) -> list[float]:
    """For each slot freed before ``horizon``, the wait until a start took it (first come, first served)."""
    waits = []
    pending = list(starts)
    for end in ends:
        if end > horizon:
            break
        later = next((index for index, start in enumerate(pending) if start >= end), None)
        if later is None:
            break
        waits.append(pending.pop(later) - end)
    return waits


def running_over_time(
    starts: list[float], ends: list[float], seconds: float, step: float = 0.25
) -> list[int]:
    """RUNNING at each step, from the ground truth."""
    samples = []
    moment = 0.0
    while moment <= seconds:
        samples.append(sum(start <= moment for start in starts) - sum(end <= moment for end in ends))
        moment += step
    return samples


def percentile(values: list[float], share: int) -> float:
    """The ``share``-th percentile (0 for no values)."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return quantiles(values, n=100, method="inclusive")[share - 1]


def latency_summary(run: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """p50 and p95 of slot-freed-to-next-start, over the slots freed while a refill could still be seen."""
    horizon = run["ended"] - run["began"] - workload.schedule_seconds - 5
    waits = refill_latencies(run["starts"], run["ends"], horizon)
    return {
        "refill": run["refill"],
        "batched": run["batched"],
        "p50": percentile(waits, 50),
        "p95": percentile(waits, 95),
        "freed": len(waits),
        "starts": len(run["starts"]),
        "invocations": len(run["invocations"]),
        "dropped": run["dropped"],
        "running": running_over_time(run["starts"], run["ends"], run["ended"] - run["began"]),
        "starts_at": run["starts"],
        "ends_at": list(run["ends"]),
    }


def burst_summary(run: dict[str, Any], window: tuple[float, float]) -> dict[str, Any]:
    """Per-second rates in the window: completions, starts, ListExecutions and DescribeExecution calls."""
    first, last = window
    seconds = last - first

    def rate(times: list[float]) -> float:
        return sum(first <= moment < last for moment in times) / seconds

    calls = [(at - run["began"], operation) for at, operation in run["calls"]]
    per_second: dict[int, int] = {}
    for at, operation in calls:
        if operation == "ListExecutions" and first <= at < last:
            per_second[int(at)] = per_second.get(int(at), 0) + 1
    invocations = [began - run["began"] for began, _, _ in run["invocations"]]
    return {
        "completions": rate(run["ends"]),
        "starts": rate(run["starts"]),
        "invocations": rate(invocations),
        "list_calls": rate([at for at, operation in calls if operation == "ListExecutions"]),
        "list_calls_peak": max(per_second.values(), default=0),
        "describe_calls": rate([at for at, operation in calls if operation == "DescribeExecution"]),
        "dropped": run["dropped"],
    }


def latency_run(workload: Workload, refill_on: bool, batched: bool = True) -> dict[str, Any]:
    """One way of delivering ends, summarised (what goes back to the benchmark's main process)."""
    return latency_summary(run_mode(workload, refill_on, batched), workload)


def burst_run(workload: Workload, reuse: str, window: tuple[float, float]) -> dict[str, Any]:
    """The burst with one LIST_REUSE_SECONDS, summarised."""
    return {"reuse": reuse, **burst_summary(run_mode(workload, True, list_reuse_seconds=reuse), window)}
