"""StartExecution against AWS's token-bucket quota: how much of the refill rate one invocation sustains.

The wire holds the dispatcher's `StartExecution` calls to a token bucket of AWS's shape
(us-east-1: 1,300 burst, 300/s refill), scaled down by ``scale`` because the emulator
on two cores serves about 200 starts/s at most. One invocation ticks for up to 45 s
(LOOP_SECONDS) over a backlog larger than the burst plus 45 s of refill; the sustained
rate is measured from the first throttle to the end.
"""

from __future__ import annotations

import json
import time
from typing import Any

from botocore.config import Config

from benchmarks.driver import (
    dispatcher_environment,
    fresh_stack,
    invoke,
    prepare_process,
    queued,
    send_backlog,
)
from benchmarks.wire import TokenBucket, emulator, fast_sqs
from dispatcher.local.account import pointed_at

AWS_BURST = 1300
AWS_REFILL = 300


def run(scale: float, retry_mode: str, seconds: float = 45.0) -> dict[str, Any]:
    """One looping invocation against the scaled bucket; its sustained rate and the loss/duplicate check.

    ``retry_mode``: botocore's retry mode of the StartExecution client ("standard", as
    shipped, or "adaptive"), to compare the two on the same quota.
    """
    prepare_process()
    from dispatcher.adapters import clients  # noqa: PLC0415 — after the environment is quiet

    clients.START_CLIENT_CONFIG = clients.START_CLIENT_CONFIG.merge(
        Config(retries={"mode": retry_mode, "max_attempts": clients.START_ATTEMPTS})
    )
    bucket = TokenBucket(capacity=AWS_BURST * scale, rate=AWS_REFILL * scale)
    backlog = int(bucket.capacity + bucket.rate * (seconds + 15))
    with (
        fast_sqs(),
        emulator(start_bucket=bucket) as emu,
        pointed_at(emu.endpoint_url),
    ):
        stack = fresh_stack("quota")
        send_backlog(stack, backlog, 100, lambda index: {"job": index})
        bucket.tokens, bucket.updated = bucket.capacity, time.monotonic()
        emu.wire.reset()
        with dispatcher_environment(stack, backlog, loop_seconds=seconds) as handler:
            began = time.time()
            report = invoke(handler, timeout=seconds + 15)
            ended = time.time()
        log = [(at, operation) for at, system, operation in emu.wire.log if system == "dispatcher"]
        ours = [execution for execution in emu.world.executions.values() if execution.by_dispatcher]
        jobs = [json.loads(execution.input)["job"] for execution in ours]
        starts = sorted(execution.started_at for execution in ours)
        throttled_at = _first_throttle(emu.wire, began)
        sustained = [start for start in starts if start >= throttled_at]
        left = queued(stack)
    return {
        "retry_mode": retry_mode,
        "scale": scale,
        "burst": bucket.capacity,
        "refill": bucket.rate,
        "backlog": backlog,
        "started": len(starts),
        "ticks": report["ticks"],
        "sustained_seconds": ended - throttled_at,
        "sustained_rate": len(sustained) / max(1e-9, ended - throttled_at),
        "throttled_calls": emu.wire.throttled,
        "start_calls": sum(operation == "StartExecution" for _, operation in log),
        "lost": backlog - len(set(jobs)) - left,
        "duplicated": len(jobs) - len(set(jobs)),
    }


def _first_throttle(wire: Any, began: float) -> float:
    """When the bucket first ran dry: from then on, every start was paid for by the refill."""
    throttles = [at for at, _, operation in wire.log if operation == "StartExecution throttled"]
    return min(throttles, default=began)
