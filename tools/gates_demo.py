"""Watch executions wait at a gate for free while at most MAX are inside its section, against an embedded AWS.

Starts moto's server on 127.0.0.1 (state machines really run: each gated execution sends
its request to the gate's queue and waits there), creates the stack and gate ``gate`` on the
sample gated workflow in pool default, and starts a burst of gated executions at once. Each
tick hands the handler the releases and ends that came since (as the end-event queue's
event source mapping does), and admits what the freed places allow. Every tick prints who
waits and who is inside against MAX; ``--plot PATH`` draws the same as a PNG (matplotlib:
the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from dispatcher.core.events import refill_pattern
from dispatcher.in_process import LocalContext
from dispatcher.local.account import environment, pointed_at
from dispatcher.local.events import Rule, sqs_event, to_queue
from dispatcher.local.gates import create_gate, create_release_queue
from dispatcher.local.server import emulated_server
from dispatcher.local.stack import create_stack
from tools.demo import _count, bar, interruptible, queue_depth

GATE = "gate"


@dataclass
class Timeline:
    """Who waits and who is inside, tick after tick (and every admission and release)."""

    seconds: list[float] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    inside: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    admissions: list[tuple[float, str]] = field(default_factory=list)
    """(when, task token) of each `SendTaskSuccess` the handler made."""
    releases: list[float] = field(default_factory=list)
    """When each release handed to the handler was sent."""


def running(state_machine_arn: str) -> int:
    """RUNNING executions of the gated workflow right now (waiting, inside, or in a free part)."""
    pages = (
        boto3.client("stepfunctions")
        .get_paginator("list_executions")
        .paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING")
    )
    return sum(len(page["executions"]) for page in pages)


def batch(queue_url: str, timeline: Timeline) -> dict[str, Any] | None:
    """The releases and ends on the end-event queue, as its event source mapping hands them over."""
    sqs = boto3.client("sqs")
    bodies, sent = [], []
    while True:
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            break
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            bodies.append(message["Body"])
            sent.append(int(message["Attributes"]["SentTimestamp"]) / 1000)
            if "release" in json.loads(message["Body"]):
                timeline.releases.append(sent[-1])
    return sqs_event(bodies, sent_at=sent) if bodies else None


def plot(timeline: Timeline, maximum: int, path: Path) -> None:
    """Inside against MAX, and who waits at the gate, over time."""
    try:
        import matplotlib  # noqa: PLC0415 — local-only, and only for --plot

        matplotlib.use("Agg")
        from matplotlib import pyplot  # noqa: PLC0415
        from matplotlib.ticker import MaxNLocator  # noqa: PLC0415
    except ImportError:
        raise SystemExit(
            "gates demo: --plot needs matplotlib: pip install 'stepfunctions-dispatcher[bench]'"
        ) from None
    figure, axes = pyplot.subplots(figsize=(10, 4))
    axes.step(timeline.seconds, timeline.running, where="post", color="lightgrey", label="RUNNING executions")
    axes.step(timeline.seconds, timeline.waiting, where="post", label="waiting at the gate (no cost)")
    # Inside is an area and MAX a line on top of it: at MAX (most of the time) both stay visible.
    axes.fill_between(
        timeline.seconds,
        timeline.inside,
        step="post",
        alpha=0.45,
        color="tab:orange",
        label="inside the section",
    )
    axes.axhline(maximum, color="black", linestyle="--", linewidth=1.5, zorder=3, label=f"MAX {maximum}")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))  # whole executions: no half steps
    axes.set_ylim(bottom=0)
    axes.set_xlabel("seconds")
    axes.set_ylabel("executions")
    axes.set_title("A gate: executions wait for free, at most MAX inside")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside, over no data
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def run(arguments: argparse.Namespace) -> int:
    """Run the demo; return the process exit code."""
    with (
        emulated_server() as (endpoint_url, emulation),
        pointed_at(endpoint_url),
        contextlib.ExitStack() as scope,
    ):
        stack = create_stack()
        release_queue = create_release_queue(stack.name)
        gate = create_gate(
            stack.name,
            GATE,
            release_queue_url=release_queue,
            free_seconds=0,
            section_seconds=arguments.duration,
        )
        emulation.rules.append(
            Rule(refill_pattern(gate["state_machine_arn"]), to_queue(release_queue, endpoint_url))
        )
        scope.enter_context(
            environment(
                {
                    **stack.environment(
                        arguments.max, receive_wait_seconds=0, lanes=json.dumps({"gates": [gate]})
                    ),
                    "POWERTOOLS_TRACE_DISABLED": "true",
                    "POWERTOOLS_METRICS_DISABLED": "true",
                    "POWERTOOLS_LOG_LEVEL": "ERROR",
                }
            )
        )
        from dispatcher import handler  # noqa: PLC0415 — import after the environment is set

        handler.reset_clients()
        timeline = Timeline()
        began = time.monotonic()

        def note(params: dict[str, Any], **_: Any) -> None:
            timeline.admissions.append((time.time(), params["taskToken"]))

        boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
        if session is None:
            raise RuntimeError("boto3 did not create its default session")
        session.events.register("provide-client-params.states.SendTaskSuccess", note)
        sfn = boto3.client("stepfunctions")
        for index in range(arguments.executions):
            sfn.start_execution(stateMachineArn=gate["state_machine_arn"], name=f"gated-{index}", input="{}")
        print(
            f"gates demo: {arguments.executions} executions reach a gate of MAX {arguments.max} at once;"
            f" each one's section lasts {arguments.duration}s, and they wait for it at no cost\n"
        )
        for tick in range(1, 10_000):
            result = handler.lambda_handler(batch(release_queue, timeline) or {}, LocalContext())
            waiting = queue_depth(gate["queue_url"])
            inside = result["gates"][GATE].get("inside", 0) + result["admitted"]
            now_running = running(gate["state_machine_arn"])
            timeline.seconds.append(time.monotonic() - began)
            timeline.waiting.append(waiting)
            timeline.inside.append(inside)
            timeline.running.append(now_running)
            print(
                f"tick {tick:3d}  waiting {waiting:3d}  inside {bar(inside, arguments.max)}"
                f" {inside}/{arguments.max}  running {now_running:3d}  admitted +{result['admitted']}"
            )
            if len(timeline.admissions) >= arguments.executions and now_running == inside == 0:
                break
            if time.monotonic() - began > arguments.timeout:
                print(f"gave up after {arguments.timeout}s", file=sys.stderr)
                return 2
            time.sleep(arguments.interval)
        return _summarise(arguments, timeline, sfn, gate["state_machine_arn"])


def _summarise(arguments: argparse.Namespace, timeline: Timeline, sfn: Any, gated: str) -> int:
    """The checks, and the plot."""
    statuses = [
        execution["status"]
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=gated)
        for execution in page["executions"]
    ]
    admitted = sorted(timeline.admissions)
    # At each admission, those admitted before it that had not sent their release yet were inside.
    most_inside = max(
        (
            index + 1 - sum(sent <= moment for sent in timeline.releases)
            for index, (moment, _) in enumerate(admitted)
        ),
        default=0,
    )
    checks = [
        (
            most_inside <= arguments.max,
            f"cap held: at most {most_inside} inside at once ≤ MAX {arguments.max}",
        ),
        (
            len({token for _, token in admitted}) == len(admitted) == arguments.executions,
            f"{len(admitted)} admissions, each execution once",
        ),
        (
            max(timeline.running, default=0) > arguments.max,
            f"up to {max(timeline.running, default=0)} RUNNING at once, those over MAX waiting at the gate",
        ),
        (
            statuses.count("SUCCEEDED") == arguments.executions,
            f"{statuses.count('SUCCEEDED')} of {arguments.executions} executions succeeded",
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
    """Command-line options of the gates demo."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=_count(1), default=3, help="pool default's MAX (default 3)")
    parser.add_argument("--executions", type=_count(1), default=12, help="gated executions (default 12)")
    parser.add_argument("--duration", type=int, default=3, help="seconds each section lasts (default 3)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between ticks (default 0.5)")
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    parser.add_argument(
        "--plot", type=Path, metavar="PATH", help="draw inside and waiting against MAX as a PNG"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m tools.gates_demo`; Ctrl-C stops it with one line."""
    return interruptible(run, parse_arguments(argv), "gates demo")


if __name__ == "__main__":
    sys.exit(main())
