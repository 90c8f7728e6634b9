"""Throughput: starts per second and AWS calls per start in one tick, and ListExecutions per tick.

One tick of each system drains a backlog at MAX = backlog, with the same simulated
latency on every call. The dispatcher gets one Lambda invocation (it admits for 45 s
of its 60 s); a baseline runs until the queue is empty or ``baseline_seconds`` have
passed (it has no ticks, and its rate is what it sustains).
"""

from __future__ import annotations

import time
from typing import Any

import boto3

from benchmarks.baselines import client as baseline_client
from benchmarks.baselines import deadline, list_only_tick, naive_loop, running_by_paging
from benchmarks.driver import (
    LAMBDA_TIMEOUT_SECONDS,
    dispatcher_environment,
    fresh_stack,
    invoke,
    prepare_process,
    queued,
    send_backlog,
)
from benchmarks.wire import emulator, fast_sqs
from dispatcher.local.account import REGION, pointed_at

GROUPS = 100


def one_tick(system: str, backlog: int, latency: float, baseline_seconds: float) -> dict[str, Any]:
    """Drain ``backlog`` jobs with one tick of ``system``; its rate and calls by operation."""
    with fast_sqs(), emulator(latency=latency) as emu, pointed_at(emu.endpoint_url):
        stack = fresh_stack(system)
        send_backlog(stack, backlog, GROUPS, lambda index: {"job": index})
        emu.wire.reset()
        began = time.monotonic()
        if system == "dispatcher":
            with dispatcher_environment(stack, backlog) as handler:
                started = invoke(handler, timeout=LAMBDA_TIMEOUT_SECONDS)["started"]
        elif system == "naive":
            started = naive_loop(stack.queue_url, stack.state_machine_arn, until=deadline(baseline_seconds))
        else:
            started = list_only_tick(
                stack.queue_url, stack.state_machine_arn, backlog, until=deadline(baseline_seconds)
            )
        seconds = time.monotonic() - began
        calls = emu.wire.count(system)
        return {
            "system": system,
            "backlog": backlog,
            "started": started,
            "seconds": seconds,
            "rate": started / seconds,
            "left": queued(stack),
            "calls": dict(calls),
            "calls_per_start": sum(calls.values()) / max(1, started),
        }


def list_calls_as_running_grows(max_concurrency: int, levels: list[int]) -> list[dict[str, Any]]:
    """ListExecutions calls of one dispatcher tick and one list-only tick at each RUNNING level."""
    results = []
    with emulator() as emu, pointed_at(emu.endpoint_url):
        stack = fresh_stack("listing")
        sfn = boto3.client("stepfunctions", region_name=REGION)
        running = 0
        for level in levels:
            for index in range(running, level):
                sfn.start_execution(
                    stateMachineArn=stack.state_machine_arn, name=f"busy-{index}", input='{"seconds": 3600}'
                )
            running = level
            emu.wire.reset()
            with dispatcher_environment(stack, max_concurrency) as handler:
                invoke(handler)
            ours = emu.wire.count("dispatcher")["ListExecutions"]
            running_by_paging(baseline_client("stepfunctions", "list-only"), stack.state_machine_arn)
            theirs = emu.wire.count("list-only")["ListExecutions"]
            results.append({"running": level, "dispatcher": ours, "list-only": theirs})
    return results


def run(
    backlogs: list[int], latency: float, baseline_seconds: float, listing: dict[str, Any]
) -> dict[str, Any]:
    """The throughput section: every system at every backlog, then the listing costs."""
    prepare_process()
    ticks = [
        one_tick(system, backlog, latency, baseline_seconds)
        for backlog in backlogs
        for system in ("dispatcher", "naive", "list-only")
    ]
    return {
        "latency": latency,
        "baseline_seconds": baseline_seconds,
        "groups": GROUPS,
        "ticks": ticks,
        "listing": {
            "max": listing["max"],
            "levels": list_calls_as_running_grows(listing["max"], listing["levels"]),
        },
    }
