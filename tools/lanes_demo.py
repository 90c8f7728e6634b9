"""Watch an urgent lane overtake a backfill that keeps their shared pool full, against an embedded AWS.

Starts moto's server on 127.0.0.1 (state machines really run), creates the stack and a
second lane, ``urgent``, into the same state machine and pool (priority 10). A backfill
fills the pool; a few ticks later urgent jobs arrive, and each slot that frees goes to
them first. Every tick prints the queues and RUNNING per lane against the pool's MAX;
``--plot PATH`` draws the same as a PNG (matplotlib: the ``bench`` extra).
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

from dispatcher.in_process import LocalContext
from dispatcher.local.account import environment, pointed_at
from dispatcher.local.server import moto_server
from dispatcher.local.stack import create_lane, create_stack, send_jobs
from tools.demo import _count, bar, interruptible, queue_depth

LANE = "urgent"


@dataclass
class Timeline:
    """RUNNING per lane, tick after tick."""

    seconds: list[float] = field(default_factory=list)
    backfill: list[int] = field(default_factory=list)
    urgent: list[int] = field(default_factory=list)


def running_by_lane(state_machine_arn: str) -> tuple[int, int]:
    """(backfill, urgent) RUNNING right now, told apart by their execution names."""
    client = boto3.client("stepfunctions")
    pages = client.get_paginator("list_executions").paginate(
        stateMachineArn=state_machine_arn, statusFilter="RUNNING"
    )
    names = [execution["name"] for page in pages for execution in page["executions"]]
    urgent = sum(name.startswith(f"{LANE}-") for name in names)
    return len(names) - urgent, urgent


def jobs(prefix: str, count: int) -> list[dict[str, str]]:
    """Jobs named ``<prefix>-<n>``, one group each."""
    return [
        {
            "body": json.dumps({"job": f"{prefix}-{index}"}),
            "group": f"{prefix}-{index}",
            "name": f"{prefix}-{index}",
        }
        for index in range(count)
    ]


def plot(timeline: Timeline, maximum: int, urgent_at: float, path: Path) -> None:
    """RUNNING per lane, stacked, against the pool's MAX."""
    try:
        import matplotlib  # noqa: PLC0415 — local-only, and only for --plot

        matplotlib.use("Agg")
        from matplotlib import pyplot  # noqa: PLC0415
        from matplotlib.ticker import MaxNLocator  # noqa: PLC0415
    except ImportError:
        raise SystemExit(
            "lanes demo: --plot needs matplotlib: pip install 'stepfunctions-dispatcher[bench]'"
        ) from None
    figure, axes = pyplot.subplots(figsize=(10, 4))
    axes.stackplot(
        timeline.seconds, timeline.backfill, timeline.urgent, labels=["backfill", LANE], step="post"
    )
    axes.axhline(maximum, color="black", linestyle="--", label=f"pool MAX {maximum}")
    axes.axvline(urgent_at, color="grey", linestyle=":", label="urgent jobs arrive")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))  # whole executions: no half steps
    axes.set_ylim(0, maximum + 1)
    axes.set_xlabel("seconds")
    axes.set_ylabel("RUNNING executions")
    axes.set_title("Two lanes, one pool: the urgent lane takes each slot that frees")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside, over no data
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def run(arguments: argparse.Namespace) -> int:
    """Run the demo; return the process exit code."""
    with moto_server() as endpoint_url, pointed_at(endpoint_url), contextlib.ExitStack() as scope:
        stack = create_stack(wait_seconds=arguments.duration)
        urgent = create_lane(stack.name, LANE, state_machine_arn=stack.state_machine_arn, priority=10)
        scope.enter_context(
            environment(
                {
                    **stack.environment(
                        arguments.max, receive_wait_seconds=0, lanes=json.dumps({"lanes": [urgent]})
                    ),
                    "POWERTOOLS_TRACE_DISABLED": "true",
                    "POWERTOOLS_METRICS_DISABLED": "true",
                    "POWERTOOLS_LOG_LEVEL": "ERROR",
                }
            )
        )
        from dispatcher import handler  # noqa: PLC0415 — import after the environment is set

        handler.reset_clients()
        send_jobs(stack.queue_url, jobs("backfill", arguments.backfill))
        print(
            f"lanes demo: a backfill of {arguments.backfill} and, from tick {arguments.urgent_tick},"
            f" {arguments.urgent} urgent jobs (priority 10) share one pool of MAX {arguments.max};"
            f" each job runs {arguments.duration}s\n"
        )
        began = time.monotonic()
        timeline = Timeline()
        urgent_at = 0.0
        order: list[str] = []
        peak = 0
        for tick in range(1, 10_000):
            if tick == arguments.urgent_tick:
                send_jobs(urgent["queue_url"], jobs(LANE, arguments.urgent))
                urgent_at = time.monotonic() - began
            result = handler.lambda_handler({}, LocalContext())
            order += [name for name, _ in _started_since(stack.state_machine_arn, order)]
            backfill_running, urgent_running = running_by_lane(stack.state_machine_arn)
            peak = max(peak, backfill_running + urgent_running)
            timeline.seconds.append(time.monotonic() - began)
            timeline.backfill.append(backfill_running)
            timeline.urgent.append(urgent_running)
            print(
                f"tick {tick:3d}  queued backfill {queue_depth(stack.queue_url):3d}"
                f" urgent {queue_depth(urgent['queue_url']):2d}"
                f"  running {bar(backfill_running + urgent_running, arguments.max)}"
                f" backfill {backfill_running} + urgent {urgent_running} / {arguments.max}"
                f"  started +{result['started']}"
            )
            drained = queue_depth(stack.queue_url) == 0 and queue_depth(urgent["queue_url"]) == 0
            if tick >= arguments.urgent_tick and drained and backfill_running + urgent_running == 0:
                break
            if time.monotonic() - began > arguments.timeout:
                print(f"gave up after {arguments.timeout}s", file=sys.stderr)
                return 2
            time.sleep(arguments.interval)
        return _summarise(arguments, order, peak, timeline, urgent_at)


def _started_since(state_machine_arn: str, seen: list[str]) -> list[tuple[str, float]]:
    """Executions started since the last look, with their start times."""
    client = boto3.client("stepfunctions")
    pages = client.get_paginator("list_executions").paginate(stateMachineArn=state_machine_arn)
    known = set(seen)
    found = [
        (execution["name"], execution["startDate"].timestamp())
        for page in pages
        for execution in page["executions"]
        if execution["name"] not in known
    ]
    return sorted(found, key=lambda item: item[1])


def _summarise(
    arguments: argparse.Namespace, order: list[str], peak: int, timeline: Timeline, urgent_at: float
) -> int:
    """The checks, and the plot."""
    urgent_positions = [index for index, name in enumerate(order) if name.startswith(f"{LANE}-")]
    between = order[urgent_positions[0] : urgent_positions[-1] + 1] if urgent_positions else []
    backfill_after = [name for name in between if not name.startswith(f"{LANE}-")]
    checks = [
        (peak <= arguments.max, f"cap held: highest RUNNING seen {peak} ≤ pool MAX {arguments.max}"),
        (
            len(urgent_positions) == arguments.urgent and not backfill_after,
            f"{len(urgent_positions)} urgent jobs started, no backfill start between the first and the last",
        ),
        (len(order) == arguments.backfill + arguments.urgent, f"{len(order)} executions, one per job"),
    ]
    print()
    for passed, line in checks:
        print(f"  {'✔' if passed else '✘'} {line}")
    if arguments.plot is not None:
        plot(timeline, arguments.max, urgent_at, arguments.plot)
        print(f"\nplot: {arguments.plot}")
    return 0 if all(passed for passed, _ in checks) else 1


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options of the lanes demo."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=_count(1), default=4, help="the pool's MAX (default 4)")
    parser.add_argument("--backfill", type=_count(0), default=16, help="backfill jobs (default 16)")
    parser.add_argument("--urgent", type=_count(0), default=3, help="urgent jobs (default 3)")
    parser.add_argument(
        "--urgent-tick", type=_count(1), default=3, help="the tick they arrive at (default 3)"
    )
    parser.add_argument("--duration", type=int, default=3, help="seconds each job runs (default 3)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks (default 1)")
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    parser.add_argument(
        "--plot", type=Path, metavar="PATH", help="draw RUNNING per lane against MAX as a PNG"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m tools.lanes_demo`; Ctrl-C stops it with one line."""
    return interruptible(run, parse_arguments(argv), "lanes demo")


if __name__ == "__main__":
    sys.exit(main())
