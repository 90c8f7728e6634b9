"""Overlapping ticks over one round, for the fault test and the soak: the round, and how to set it up."""

from __future__ import annotations

import contextlib
import json
import os
import random
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
from tests.support.faulty_aws import FaultyAws, backend_execution
from tests.support.plans import FaultPlan, Lag
from tests.support.world import World


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
    names = send_jobs(stack, jobs=outcome.jobs, seconds=rng.choice([0.1, 0.3]))
    with real_time(middleware, world):
        processes = [
            ticker(
                endpoint_url,
                stack,
                outcome.max_concurrency,
                *("--seconds", "30", "--timeout", "4", "--until-drained", "--ready-go"),
                time_margin_seconds=1,
            )
            for _ in range(2)
        ]
        start_together(processes)
        reports = [report for process in processes for report in reports_of(process)]
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


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ticker(
    endpoint_url: str, stack: Stack, max_concurrency: int, *arguments: str, **settings: Any
) -> subprocess.Popen[str]:
    """A `dispatcher tick --loop` process against ``endpoint_url``."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
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
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_together(processes: list[subprocess.Popen[str]]) -> None:
    """Let tickers started with ``--ready-go`` tick, once every one of them has loaded."""
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == "READY\n", line + (process.stderr.read() if process.stderr else "")
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()


def reports_of(process: subprocess.Popen[str], timeout: float = 60) -> list[dict[str, Any]]:
    """The tick reports ``process`` printed, after it exited 0."""
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-2000:]
    return [
        json.loads(line.removeprefix("REPORT ")) for line in out.splitlines() if line.startswith("REPORT ")
    ]


@contextlib.contextmanager
def real_time(middleware: FaultyAws, world: World) -> Iterator[None]:
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


def send_jobs(stack: Stack, jobs: int, seconds: float) -> list[str]:
    """Queues ``jobs`` jobs that run ``seconds`` each; their names."""
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
