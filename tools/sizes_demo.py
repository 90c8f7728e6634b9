"""Watch a large job get its room in a pool kept busy by small ones, against an embedded AWS.

Starts moto's server on 127.0.0.1 (state machines really run) and creates the stack. Pool
default has MAX slots (10 by default); a stream of one-slot jobs keeps it full, and a few
seconds in, one large job (6 slots) is queued before more small ones. Every tick prints the
slots in use against MAX and whether the large job waits (its pool keeps the freed slots for
it: no small job starts in them) or runs; ``--plot PATH`` draws it as a PNG (matplotlib: the
``bench`` extra).
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

from dispatcher.core.messages import SLOTS_ATTRIBUTE
from dispatcher.in_process import LocalContext
from dispatcher.local.account import environment, pointed_at
from dispatcher.local.server import moto_server
from dispatcher.local.stack import Stack, create_stack
from tools.demo import _count, bar, interruptible

LARGE = "large-job"


@dataclass
class Timeline:
    """Slots in use, tick after tick, and the large job's state."""

    seconds: list[float] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    large: list[str] = field(default_factory=list)
    """``queued``, ``waiting`` (received, its room kept), ``running`` or ``done``."""


def _send(stack: Stack, name: str, slots: int) -> None:
    boto3.client("sqs").send_message(
        QueueUrl=stack.queue_url,
        MessageBody=json.dumps({"job": name}),
        MessageGroupId=name,
        MessageDeduplicationId=name,
        MessageAttributes={
            "ExecutionName": {"DataType": "String", "StringValue": name},
            SLOTS_ATTRIBUTE: {"DataType": "Number", "StringValue": str(slots)},
        },
    )


def _state(stack: Stack, sizes: dict[str, int]) -> tuple[int, str]:
    """The slots RUNNING executions take, and what the large job is doing."""
    client = boto3.client("stepfunctions")
    pages = client.get_paginator("list_executions").paginate(stateMachineArn=stack.state_machine_arn)
    statuses = {execution["name"]: execution["status"] for page in pages for execution in page["executions"]}
    used = sum(sizes.get(name, 1) for name, status in statuses.items() if status == "RUNNING")
    large = statuses.get(LARGE)
    return used, "queued" if large is None else "running" if large == "RUNNING" else "done"


def plot(timeline: Timeline, maximum: int, large: int, path: Path) -> None:
    """Slots in use against MAX, with the large job's wait and run shaded."""
    try:
        import matplotlib  # noqa: PLC0415 — local-only, and only for --plot

        matplotlib.use("Agg")
        from matplotlib import pyplot  # noqa: PLC0415
    except ImportError:
        raise SystemExit(
            "sizes demo: --plot needs matplotlib: pip install 'stepfunctions-dispatcher[bench]'"
        ) from None
    figure, axes = pyplot.subplots(figsize=(10, 4))
    axes.step(timeline.seconds, timeline.used, where="post", color="tab:blue", label="slots in use")
    axes.axhline(maximum, color="black", linestyle="--", label=f"MAX {maximum} slots")
    for state, colour, label in (
        ("waiting", "tab:orange", f"the {large}-slot job waits: its room is kept"),
        ("running", "tab:green", f"the {large}-slot job runs"),
    ):
        spans = [at for at, seen in zip(timeline.seconds, timeline.large, strict=True) if seen == state]
        if spans:
            axes.axvspan(min(spans), max(spans), color=colour, alpha=0.2, label=label)
    axes.set_ylim(0, maximum + 1)
    axes.set_xlabel("seconds")
    axes.set_ylabel("slots")
    axes.set_title("A job's size: a large job gets its room in a pool kept busy by small ones")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def run(arguments: argparse.Namespace) -> int:
    """Run the demo; return the process exit code."""
    with moto_server() as endpoint_url, pointed_at(endpoint_url), contextlib.ExitStack() as scope:
        stack = create_stack(wait_seconds=arguments.duration)
        scope.enter_context(
            environment(
                {
                    **stack.environment(arguments.max, receive_wait_seconds=0),
                    "POWERTOOLS_TRACE_DISABLED": "true",
                    "POWERTOOLS_METRICS_DISABLED": "true",
                    "POWERTOOLS_LOG_LEVEL": "ERROR",
                }
            )
        )
        from dispatcher import handler  # noqa: PLC0415 — import after the environment is set

        handler.reset_clients()
        sizes = {LARGE: arguments.large}
        small = iter(range(1_000_000))
        for _ in range(arguments.max):
            _send(stack, f"small-{next(small)}", 1)
        print(
            f"sizes demo: MAX {arguments.max} slots, small jobs of 1 slot ({arguments.duration}s each)"
            f" keep it full; after {arguments.after:g}s a job of {arguments.large} slots is queued"
            " before more small ones\n"
        )
        began, timeline, sent_large = time.monotonic(), Timeline(), False
        for tick in range(1, 100_000):
            elapsed = time.monotonic() - began
            if elapsed > arguments.seconds:
                break
            if not sent_large and elapsed >= arguments.after:
                _send(stack, LARGE, arguments.large)
                sent_large = True
            for _ in range(2):  # the stream of small ones never stops
                _send(stack, f"small-{next(small)}", 1)
            result = handler.lambda_handler({}, LocalContext())
            used, large = _state(stack, sizes)
            large = "waiting" if sent_large and large == "queued" else large
            timeline.seconds.append(elapsed)
            timeline.used.append(used)
            timeline.large.append(large if sent_large else "not sent")
            print(
                f"tick {tick:3d} {elapsed:5.1f}s slots {bar(used, arguments.max)} {used:2d} / {arguments.max}"
                f"  large job: {timeline.large[-1]:<8}  started +{result['started']}"
            )
            time.sleep(arguments.interval)
        return _summarise(arguments, timeline)


def _summarise(arguments: argparse.Namespace, timeline: Timeline) -> int:
    """The checks, and the plot."""
    waited = [at for at, state in zip(timeline.seconds, timeline.large, strict=True) if state == "waiting"]
    checks = [
        (
            max(timeline.used, default=0) <= arguments.max,
            f"cap held in slots: most in use {max(timeline.used, default=0)} ≤ MAX {arguments.max}",
        ),
        (
            any(state in {"running", "done"} for state in timeline.large),
            f"the {arguments.large}-slot job started"
            + (f" after waiting {max(waited) - min(waited):.1f}s" if waited else ""),
        ),
    ]
    print()
    for passed, line in checks:
        print(f"  {'✔' if passed else '✘'} {line}")
    if arguments.plot is not None:
        plot(timeline, arguments.max, arguments.large, arguments.plot)
        print(f"\nplot: {arguments.plot}")
    return 0 if all(passed for passed, _ in checks) else 1


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options of the sizes demo."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=_count(2), default=10, help="pool default's MAX in slots (default 10)")
    parser.add_argument("--large", type=_count(2), default=6, help="the large job's slots (default 6)")
    parser.add_argument("--duration", type=int, default=3, help="seconds each job runs (default 3)")
    parser.add_argument("--after", type=float, default=4.0, help="seconds before the large job is sent (4)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the demo runs (default 30)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between ticks (default 0.5)")
    parser.add_argument("--plot", type=Path, metavar="PATH", help="draw the slots in use as a PNG")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m tools.sizes_demo`; Ctrl-C stops it with one line."""
    return interruptible(run, parse_arguments(argv), "sizes demo")


if __name__ == "__main__":
    sys.exit(main())
