"""Overlapping ticks in separate processes, through the faulty emulator on the real clock.

What reserved concurrency 1 used to guarantee, the tick lease now does: two dispatcher
processes ticking at once never start more than MAX between them, and a process killed
while it holds the lease holds up the others only until its invocation's time is up.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3

from dispatcher.local.account import FAKE_CREDENTIALS, REGION
from dispatcher.local.stack import Stack, create_stack
from tests.support.faulty_aws import FaultyAws, Request, backend_execution
from tests.support.world import FaultPlan, Lag, World

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _ticker(
    endpoint_url: str, stack: Stack, max_concurrency: int, *arguments: str, **settings: Any
) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        **{key: value for key, value in os.environ.items() if key.startswith("COVERAGE_")},
        **FAKE_CREDENTIALS,
        "AWS_ENDPOINT_URL": endpoint_url,
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "POWERTOOLS_METRICS_DISABLED": "true",
        **stack.environment(max_concurrency, receive_wait_seconds=0, **settings),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.faults.ticker", *arguments],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _reports(process: subprocess.Popen[str], timeout: float = 60) -> list[dict[str, Any]]:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-2000:]
    return [
        json.loads(line.removeprefix("REPORT ")) for line in out.splitlines() if line.startswith("REPORT ")
    ]


@contextlib.contextmanager
def _real_time(middleware: FaultyAws, world: World) -> Iterator[None]:
    """Run the world on the real clock, ending executions as their time comes."""
    middleware.world = world
    stop = threading.Event()

    def end_due() -> None:
        def end(execution: Any) -> None:
            record = backend_execution(execution.arn)
            record.status = "SUCCEEDED"

        while not stop.wait(0.05):
            world.advance(0, end)

    ender = threading.Thread(target=end_due, daemon=True)
    ender.start()
    try:
        yield
    finally:
        stop.set()
        ender.join()
        middleware.before = None


def _send(stack: Stack, jobs: int, seconds: float) -> list[str]:
    sqs = boto3.client("sqs", region_name=REGION)
    names = []
    for job in range(jobs):
        name = f"job-{job}"
        sqs.send_message(
            QueueUrl=stack.queue_url,
            MessageBody=json.dumps({"job": job, "seconds": seconds}),
            MessageGroupId=f"g{job}",
            MessageDeduplicationId=name,
            MessageAttributes={"ExecutionName": {"DataType": "String", "StringValue": name}},
        )
        names.append(name)
    return names


@dataclass
class OverlapRound:
    """What one round of two overlapping dispatcher processes did, and what it broke."""

    seed: int
    max_concurrency: int
    jobs: int
    started: int = 0
    ticks: int = 0
    busy: int = 0
    violations: list[str] = field(default_factory=list)


def overlap_round(middleware: FaultyAws, endpoint_url: str, seed: int) -> OverlapRound:
    """Two processes tick at once against one backlog, the list lagging; check cap, loss, duplicates."""
    rng = random.Random(f"{seed}:overlap")
    outcome = OverlapRound(seed=seed, max_concurrency=rng.randint(1, 4), jobs=rng.randint(4, 10))
    lag = Lag(start=rng.choice([0.0, 0.5, 1.0]), end=rng.choice([0.0, 0.5, 1.0]))
    world = World(seed=seed, start=time.time(), clock=time.time, faults=FaultPlan(lag=lag))
    world.max_concurrency = outcome.max_concurrency
    stack = create_stack(f"overlap-{seed}-{os.getpid()}-{rng.randrange(10**6)}")
    names = _send(stack, jobs=outcome.jobs, seconds=rng.choice([0.1, 0.3]))
    with _real_time(middleware, world):
        processes = [
            _ticker(
                endpoint_url,
                stack,
                outcome.max_concurrency,
                *("--seconds", "30", "--timeout", "4", "--until-drained"),
                time_margin_seconds=1,
            )
            for _ in range(2)
        ]
        reports = [report for process in processes for report in _reports(process)]
    outcome.violations += world.violations
    started = sorted(execution.name for execution in world.executions.values() if execution.by_dispatcher)
    outcome.started = len(started)
    if started != sorted(names):
        outcome.violations.append(f"started {started}, expected each of {sorted(names)} once")
    outcome.ticks = len(reports)
    outcome.busy = sum(report["stopped"] == "busy" for report in reports)
    outcome.violations += [
        f"a tick without the lease started {report['started']}"
        for report in reports
        if report["stopped"] == "busy" and report["started"]
    ]
    return outcome


def test_overlapping_ticks_in_two_processes_never_exceed_max(faulty_aws: FaultyAws) -> None:
    """Two processes tick as fast as they can, the list lagging: never above MAX, every job started once."""
    outcome = overlap_round(faulty_aws, faulty_aws_endpoint(), seed=1)
    assert outcome.violations == []
    assert outcome.busy > 0, "the processes never overlapped"


def test_holder_killed_mid_tick_delays_the_next_tick_only_until_its_lease_expires(
    faulty_aws: FaultyAws,
) -> None:
    """A process killed inside StartExecution holds the lease until its deadline, no longer; the cap holds."""
    world = World(seed=3, start=time.time(), clock=time.time, faults=FaultPlan(lag=Lag(start=2.0)))
    world.max_concurrency = 4
    stack = create_stack(f"killed-{os.getpid()}")
    _send(stack, jobs=2, seconds=60)
    inside = threading.Event()
    release = threading.Event()

    def hold_first_start(request: Request) -> None:
        if request.operation == "StartExecution" and not inside.is_set():
            inside.set()
            release.wait(30)

    timeout = 5.0  # the next ticker is a new process: room for its start-up on a busy machine
    with _real_time(faulty_aws, world):
        faulty_aws.before = hold_first_start
        holder = _ticker(
            faulty_aws_endpoint(),
            stack,
            4,
            "--ticks",
            "1",
            "--timeout",
            str(timeout),
            time_margin_seconds=0.5,
        )
        assert inside.wait(30), "the holder never reached StartExecution"
        killed_at = time.time()
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        release.set()
        boto3.client("sqs", region_name=REGION).send_message(
            QueueUrl=stack.queue_url,
            MessageBody=json.dumps({"job": "late", "seconds": 60}),
            MessageGroupId="late",
            MessageDeduplicationId="late",
        )
        other = _ticker(
            faulty_aws_endpoint(), stack, 4, "--seconds", str(timeout + 2), time_margin_seconds=0.5
        )
        reports = _reports(other)
    busy = [report for report in reports if report["stopped"] == "busy"]
    ran = [report for report in reports if report["stopped"] != "busy"]
    assert busy, "the killed holder's lease was never seen"
    assert ran, "no tick ran after the lease expired"
    # The lease was taken just before the held StartExecution and expires `timeout` later.
    assert ran[0]["began"] - killed_at <= timeout + 1.0
    assert max(report["ended"] for report in busy) - killed_at <= timeout + 0.5
    assert sum(report["started"] for report in ran) >= 1
    assert world.violations == []


def faulty_aws_endpoint() -> str:
    return os.environ["AWS_ENDPOINT_URL"]
