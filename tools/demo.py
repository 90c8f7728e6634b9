"""Watch the dispatcher drain a backlog under its cap, against an embedded AWS.

Starts moto's server on 127.0.0.1 (state machines really run), creates the queue,
DLQ, state table and a sample workflow, enqueues jobs across message groups and
invokes the real Lambda handler tick after tick until the queue is drained.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3

from dispatcher.in_process import LocalContext
from dispatcher.local.account import environment, pointed_at
from dispatcher.local.server import moto_server
from dispatcher.local.stack import Stack, StartLog, create_stack, read_all, send_jobs

BAR_WIDTH = 20


@dataclass
class RunningSampler:
    """Samples RUNNING executions from the emulator's ground truth in the background."""

    state_machine_arn: str
    interval: float = 0.2
    peak: int = 0
    latest: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def count(self) -> int:
        """RUNNING executions right now (moto's list has no lag)."""
        client = boto3.client("stepfunctions")
        pages = client.get_paginator("list_executions").paginate(
            stateMachineArn=self.state_machine_arn, statusFilter="RUNNING"
        )
        return sum(len(page["executions"]) for page in pages)

    def run(self) -> None:
        """Sample until stopped."""
        while not self._stop.is_set():
            self.latest = self.count()
            self.peak = max(self.peak, self.latest)
            self._stop.wait(self.interval)

    def __enter__(self) -> RunningSampler:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def queue_depth(queue_url: str) -> int:
    """Messages waiting or in flight on a queue."""
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def make_jobs(count: int, groups: int, poison: int) -> list[dict[str, Any]]:
    """Jobs spread round-robin over groups; ``poison`` of them have a body that isn't JSON."""
    jobs = []
    for index in range(count):
        group = f"group-{index % groups}"
        body = json.dumps({"job": index, "group": group})
        jobs.append({"body": body, "group": group, "job": index})
    for index in range(poison):
        jobs.append({"body": f"not json #{index}", "group": f"group-{index % groups}", "job": None})
    return jobs


def bar(value: int, maximum: int) -> str:
    """A fixed-width bar showing value out of maximum."""
    filled = 0 if maximum == 0 else round(BAR_WIDTH * min(value, maximum) / maximum)
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def summarise(
    stack: Stack, jobs: list[dict[str, Any]], starts: StartLog, peak: int, maximum: int
) -> list[tuple[bool, str]]:
    """Check the run against the emulator's ground truth; one line per guarantee."""
    sfn = boto3.client("stepfunctions")
    executions = [
        execution
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=stack.state_machine_arn)
        for execution in page["executions"]
    ]
    names = [execution["name"] for execution in executions]
    valid = [job for job in jobs if job["job"] is not None]
    started_inputs = [json.loads(call["input"])["job"] for call in starts.calls if call["input"]]
    by_group: dict[str, list[int]] = defaultdict(list)
    for job_index in dict.fromkeys(started_inputs):
        by_group[valid[job_index]["group"]].append(job_index)
    in_order = all(sequence == sorted(sequence) for sequence in by_group.values())
    if maximum == 0:
        # Paused: the guarantee is that nothing started and nothing was lost.
        waiting = queue_depth(stack.queue_url)
        return [
            (not starts.calls, f"paused: {len(starts.calls)} executions started at MAX 0"),
            (waiting == len(jobs), f"nothing lost: {waiting} of {len(jobs)} messages still queued"),
        ]
    dead = read_all(stack.dead_letter_queue_url)
    reasons = sorted({message["MessageAttributes"]["DispatchError"]["StringValue"] for message in dead})
    poison = len(jobs) - len(valid)
    return [
        (peak <= maximum, f"cap held: highest RUNNING seen {peak} ≤ MAX {maximum}"),
        (
            len(executions) == len(valid) and len(set(names)) == len(names),
            f"{len(executions)} executions for {len(valid)} jobs, {len(names) - len(set(names))} duplicates",
        ),
        (
            in_order and (len(by_group) > 0 or not valid),
            f"group order kept in {len(by_group)} groups" if in_order else "group order broken",
        ),
        (
            len(dead) == poison,
            f"{len(dead)} poison messages dead-lettered" + (f" ({reasons[0][:60]}…)" if reasons else ""),
        ),
        (queue_depth(stack.queue_url) == 0, "queue drained"),
    ]


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
                    "POWERTOOLS_LOG_LEVEL": "INFO" if arguments.verbose else "ERROR",
                }
            )
        )
        from dispatcher import handler  # noqa: PLC0415 — import after the environment is set

        handler.reset_clients()
        starts = StartLog().install()
        jobs = make_jobs(arguments.jobs, arguments.groups, arguments.poison)
        send_jobs(stack.queue_url, jobs)
        print(
            f"dispatcher demo: {arguments.jobs} jobs + {arguments.poison} poison"
            f" in {arguments.groups} groups,"
            f" MAX_CONCURRENCY={arguments.max}, each job runs {arguments.duration}s,"
            f" a tick every {arguments.interval}s\n"
        )
        began = time.monotonic()
        ticks = 0
        dead_lettered = 0
        with RunningSampler(stack.state_machine_arn) as sampler:
            while True:
                ticks += 1
                result = handler.lambda_handler({}, LocalContext())
                queued = queue_depth(stack.queue_url)
                running = sampler.count()
                done = len(starts.calls) - running
                dead_lettered += result["dead_lettered"]
                print(
                    f"tick {ticks:3d}  queued {queued:4d}  running {bar(running, arguments.max)}"
                    f" {running:3d}/{arguments.max}  started +{result['started']:<3d}"
                    f" done {max(done, 0):4d}  dead-lettered {dead_lettered}"
                )
                if queued == 0 and running == 0:
                    break
                if result["stopped"] == "paused":
                    print("\nMAX_CONCURRENCY=0 pauses the dispatcher: nothing starts, nothing is lost.")
                    break
                if time.monotonic() - began > arguments.timeout:
                    print(f"gave up after {arguments.timeout}s", file=sys.stderr)
                    return 2
                time.sleep(arguments.interval)
            peak = sampler.peak
        elapsed = time.monotonic() - began
        checks = summarise(stack, jobs, starts, peak, arguments.max)
        print()
        for passed, line in checks:
            mark = "✔" if passed else "✘"
            print(f"  {mark} {line}")
        ok = all(passed for passed, _ in checks)
        drained = "left queued (paused)" if arguments.max == 0 else "drained"
        print(
            f"\nsummary: {arguments.jobs} jobs {drained} in {ticks} ticks ({elapsed:.1f}s), peak RUNNING"
            f" {peak}/{arguments.max}, {len(starts.calls)} starts,"
            f" {'all guarantees held' if ok else 'FAILED'}"
        )
        return 0 if ok else 1


def _count(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, not {text!r}")
        return int(text)

    return parse


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options of the demo."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=_count(0), default=5, help="MAX_CONCURRENCY; 0 pauses (default 5)")
    parser.add_argument("--jobs", type=_count(0), default=30, help="valid jobs to enqueue (default 30)")
    parser.add_argument("--groups", type=_count(1), default=4, help="message groups, at least 1 (default 4)")
    parser.add_argument("--poison", type=_count(0), default=2, help="poison messages to enqueue (default 2)")
    parser.add_argument("--duration", type=int, default=3, help="seconds each job runs (default 3)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks (default 1)")
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    parser.add_argument("--verbose", action="store_true", help="show the handler's JSON logs")
    return parser.parse_args(argv)


INTERRUPTED = 130
"""The shell's exit status for a program stopped by Ctrl-C (128 + SIGINT)."""


def interruptible(run: Callable[[argparse.Namespace], int], arguments: argparse.Namespace, name: str) -> int:
    """``run(arguments)``; Ctrl-C stops it with one line, not a traceback."""
    try:
        return run(arguments)
    except KeyboardInterrupt:
        sys.stdout.flush()
        sys.stderr.write(f"\n{name}: interrupted; nothing to clean up (the emulator lived in this process)\n")
        return INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m tools.demo`; Ctrl-C stops it with one line, not a traceback."""
    return interruptible(run, parse_arguments(argv), "demo")


if __name__ == "__main__":
    sys.exit(main())
