"""Watch an adaptive pool learn a downstream's capacity it is never told, against an embedded AWS.

Starts moto's server on 127.0.0.1 (state machines really run), creates the stack with the
sample workflow that takes a slot of a simulated downstream API, and makes pool default
adaptive (``Downstream.Throttled`` is its signal). The API's capacity changes as the demo
goes (6, then 3, then 8 by default, as `python -m dispatcher.local downstream capacity N`
sets it); the dispatcher only sees executions fail. Every tick prints the capacity, RUNNING
and the limit L against MAX; ``--plot PATH`` draws them as a PNG (matplotlib: the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import boto3

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.core.topology import DEFAULT
from dispatcher.in_process import LocalContext
from dispatcher.local.account import environment, pointed_at
from dispatcher.local.server import moto_server
from dispatcher.local.stack import create_stack, send_jobs
from dispatcher.local.workflows import THROTTLED_ERROR, set_capacity
from tools.demo import _count, bar, interruptible


@dataclass
class Timeline:
    """Capacity, RUNNING and L, tick after tick."""

    seconds: list[float] = field(default_factory=list)
    capacity: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    limit: list[int] = field(default_factory=list)


def running_now(state_machine_arn: str) -> int:
    """RUNNING executions of the state machine right now."""
    pages = (
        boto3.client("stepfunctions")
        .get_paginator("list_executions")
        .paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING")
    )
    return sum(len(page["executions"]) for page in pages)


def plot(timeline: Timeline, maximum: int, path: Path) -> None:
    """L, RUNNING and the hidden capacity over time."""
    try:
        import matplotlib  # noqa: PLC0415 — local-only, and only for --plot

        matplotlib.use("Agg")
        from matplotlib import pyplot  # noqa: PLC0415
    except ImportError:
        raise SystemExit(
            "adaptive demo: --plot needs matplotlib: pip install 'stepfunctions-dispatcher[bench]'"
        ) from None
    figure, axes = pyplot.subplots(figsize=(10, 4))
    axes.step(
        timeline.seconds,
        timeline.capacity,
        where="post",
        color="grey",
        linestyle=":",
        label="capacity (hidden)",
    )
    axes.step(timeline.seconds, timeline.limit, where="post", color="tab:orange", label="limit L")
    axes.step(timeline.seconds, timeline.running, where="post", color="tab:blue", label="RUNNING")
    axes.axhline(maximum, color="black", linestyle="--", label=f"MAX {maximum}")
    axes.set_ylim(0, maximum + 1)
    axes.set_xlabel("seconds")
    axes.set_ylabel("executions")
    axes.set_title("An adaptive pool: cut by the throttles, searched back up, probing beyond")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def capacity_at(seconds: float, arguments: argparse.Namespace) -> int:
    """The downstream's capacity at this moment of the demo."""
    phase = min(int(seconds // arguments.phase), len(arguments.capacities) - 1)
    return int(arguments.capacities[phase])


def run(arguments: argparse.Namespace) -> int:
    """Run the demo; return the process exit code."""
    adaptive = {
        "errors": [THROTTLED_ERROR],
        "min": 1,
        **({} if arguments.initial is None else {"initial": arguments.initial}),
        "decrease": arguments.decrease,
        "cooldown_seconds": arguments.cooldown,
    }
    with moto_server() as endpoint_url, pointed_at(endpoint_url), contextlib.ExitStack() as scope:
        stack = create_stack(wait_seconds=arguments.duration, downstream=True, slots=True)
        scope.enter_context(
            environment(
                {
                    **stack.environment(
                        arguments.max,
                        receive_wait_seconds=0,
                        lanes=json.dumps({"pools": {DEFAULT: {"adaptive": adaptive}}}),
                    ),
                    "POWERTOOLS_TRACE_DISABLED": "true",
                    "POWERTOOLS_METRICS_DISABLED": "true",
                    "POWERTOOLS_LOG_LEVEL": "ERROR",
                    "MOTO_PORT": endpoint_url.rsplit(":", 1)[
                        -1
                    ],  # the workflow's DynamoDB tasks call back here
                }
            )
        )
        from dispatcher import handler  # noqa: PLC0415 — import after the environment is set

        handler.reset_clients()
        total = arguments.phase * len(arguments.capacities)
        jobs = [
            {"body": json.dumps({"job": index}), "group": f"g{index % 20}"} for index in range(arguments.jobs)
        ]
        send_jobs(stack.queue_url, jobs)
        ledger = StartLedgerTable(boto3.client("dynamodb"), stack.state_table, stack.state_machine_arn)
        print(
            f"adaptive demo: MAX {arguments.max}, jobs of {arguments.duration}s; the downstream's capacity is"
            f" {', then '.join(str(c) for c in arguments.capacities)} ({arguments.phase:g}s each),"
            f" never told to the dispatcher: it sees executions fail with {THROTTLED_ERROR}\n"
        )
        began, timeline, capacity = time.monotonic(), Timeline(), None
        for tick in range(1, 100_000):
            elapsed = time.monotonic() - began
            if elapsed > total:
                break
            if capacity != (wanted := capacity_at(elapsed, arguments)):
                capacity = wanted
                set_capacity(stack.downstream_table, capacity)
            result = handler.lambda_handler({}, LocalContext())
            kept = ledger.limit(DEFAULT)
            limit = (arguments.initial or arguments.max) if kept is None else kept.limit
            running = running_now(stack.state_machine_arn)
            timeline.seconds.append(elapsed)
            timeline.capacity.append(capacity)
            timeline.running.append(running)
            timeline.limit.append(limit)
            print(
                f"tick {tick:3d} {elapsed:5.1f}s capacity {capacity:2d} running {bar(running, arguments.max)}"
                f" {running:2d}  limit L {limit:2d} / MAX {arguments.max}  started +{result['started']}"
            )
            time.sleep(arguments.interval)
        return _summarise(arguments, timeline)


def _summarise(arguments: argparse.Namespace, timeline: Timeline) -> int:
    """The checks, and the plot."""
    cut = [
        limit
        for limit, capacity in zip(timeline.limit, timeline.capacity, strict=True)
        if capacity < arguments.max
    ]
    checks = [
        (
            max(timeline.running, default=0) <= arguments.max,
            f"cap held: highest RUNNING {max(timeline.running, default=0)} ≤ MAX {arguments.max}",
        ),
        (
            bool(cut) and min(cut) < arguments.max,
            f"L was cut below MAX by throttles (lowest {min(cut, default=arguments.max)})",
        ),
        (
            all(1 <= limit <= arguments.max for limit in timeline.limit),
            f"L stayed within [1, {arguments.max}]",
        ),
    ]
    print()
    for passed, line in checks:
        print(f"  {'✔' if passed else '✘'} {line}")
    if arguments.plot is not None:
        plot(timeline, arguments.max, arguments.plot)
        print(f"\nplot: {arguments.plot}")
    return 0 if all(passed for passed, _ in checks) else 1


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options of the adaptive demo."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=_count(1), default=12, help="pool default's MAX (default 12)")
    parser.add_argument(
        "--capacities",
        type=_count(1),
        nargs="+",
        default=[6, 3, 8],
        help="the downstream's capacity, phase by phase",
    )
    parser.add_argument("--phase", type=float, default=40.0, help="seconds each capacity lasts (default 40)")
    parser.add_argument("--duration", type=int, default=4, help="seconds each job runs (default 4)")
    parser.add_argument("--cooldown", type=float, default=2.0, help="cooldown_seconds (default 2)")
    parser.add_argument("--decrease", type=float, default=0.7, help="decrease (default 0.7)")
    parser.add_argument(
        "--initial", type=_count(1), default=None, help="where L starts (default: MAX, as the contract's)"
    )
    parser.add_argument(
        "--jobs",
        type=_count(1),
        default=300,
        help="jobs queued (default 300: not drained in the demo's time)",
    )
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks (default 1)")
    parser.add_argument("--plot", type=Path, metavar="PATH", help="draw L, RUNNING and the capacity as a PNG")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m tools.adaptive_demo`; Ctrl-C stops it with one line."""
    return interruptible(run, parse_arguments(argv), "adaptive demo")


if __name__ == "__main__":
    sys.exit(main())
