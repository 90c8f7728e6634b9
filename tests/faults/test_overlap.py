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
import pytest

from dispatcher import handler
from dispatcher.in_process import LocalContext
from dispatcher.local.account import FAKE_CREDENTIALS, REGION, environment
from dispatcher.local.stack import Stack, create_stack
from tests.support.faulty_aws import FaultyAws, Request, backend_execution
from tests.support.world import FaultPlan, Lag, World

pytestmark = pytest.mark.no_cover
"""Whole fault scenarios: untraced (tracing doubles a test's CPU time, and the same lines run,
measured, in the tests of each part; CONTRIBUTING, "The suite's time")."""

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _ticker(
    endpoint_url: str, stack: Stack, max_concurrency: int, *arguments: str, **settings: Any
) -> subprocess.Popen[str]:
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


def _start_together(processes: list[subprocess.Popen[str]]) -> None:
    """Let tickers started with ``--ready-go`` tick, once every one of them has loaded."""
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == "READY\n", line + (process.stderr.read() if process.stderr else "")
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()


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
                *("--seconds", "30", "--timeout", "4", "--until-drained", "--ready-go"),
                time_margin_seconds=1,
            )
            for _ in range(2)
        ]
        _start_together(processes)
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
    """A process killed inside StartExecution holds the lease until its deadline, no longer; the cap holds.

    Checked against the deadline the holder wrote and the clock reading each later attempt
    to take the lease sent, not against guesses of how fast a process starts: the next
    ticks run here, one after another from the moment of the kill, until one takes it.
    """
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

    with _real_time(faulty_aws, world):
        faulty_aws.before = hold_first_start
        holder = _ticker(
            faulty_aws_endpoint(), stack, 4, "--ticks", "1", "--timeout", "10", time_margin_seconds=0.5
        )
        assert inside.wait(60), "the holder never reached StartExecution"
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        release.set()
        held_until = _lease_deadline(stack)
        boto3.client("sqs", region_name=REGION).send_message(
            QueueUrl=stack.queue_url,
            MessageBody=json.dumps({"job": "late", "seconds": 60}),
            MessageGroupId="late",
            MessageDeduplicationId="late",
        )
        attempts: list[tuple[float, bool]] = []
        reports = _tick_until_one_runs(stack, held_until + 60, attempts)
    assert [report["stopped"] == "busy" for report in reports] == [True] * (len(reports) - 1) + [False]
    assert reports[-1]["started"] >= 1
    # Each attempt to take the lease: refused while the dead holder's deadline lasts, taken after it.
    assert attempts, "no tick tried to take the lease"
    assert [taken for _, taken in attempts] == [now > held_until for now, _ in attempts]
    assert world.violations == []


def _lease_deadline(stack: Stack) -> float:
    """When the tick lease's holder must have let go (what it wrote when it took the lease)."""
    item = boto3.client("dynamodb", region_name=REGION).get_item(
        TableName=stack.state_table,
        Key={"pk": {"S": f"lease#{stack.state_machine_arn}"}, "sk": {"S": "tick"}},
    )["Item"]
    return float(item["held_until"]["N"])


def _tick_until_one_runs(
    stack: Stack, give_up_at: float, attempts: list[tuple[float, bool]]
) -> list[dict[str, Any]]:
    """Tick the real handler here, as invocations would come, until one takes the lease.

    Each report; ``attempts`` gets each attempt to take the lease: the clock reading it
    sent (``:now``) and whether it was taken.
    """

    def note_now(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["lease_now"] = float(params["ExpressionAttributeValues"][":now"]["N"])

    def note_answer(http_response: Any, context: dict[str, Any], **_: Any) -> None:
        attempts.append((context["lease_now"], http_response.status_code == 200))

    variables = {
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "POWERTOOLS_METRICS_DISABLED": "true",
        **stack.environment(4, receive_wait_seconds=0, time_margin_seconds=0.5),
    }
    boto3.setup_default_session()
    session = boto3.DEFAULT_SESSION
    assert session is not None
    session.events.register("provide-client-params.dynamodb.PutItem", note_now)
    session.events.register("after-call.dynamodb.PutItem", note_answer)
    reports: list[dict[str, Any]] = []
    with environment(variables):
        handler.reset_clients()
        while time.time() < give_up_at:
            report = handler.lambda_handler({}, LocalContext(10))
            reports.append(report)
            if report["stopped"] != "busy":
                return reports
            time.sleep(0.1)  # the next invocation comes a moment later, as a schedule or event would
    raise AssertionError(f"no tick took the lease by {give_up_at:.1f}: {reports[-3:]}")


def faulty_aws_endpoint() -> str:
    return os.environ["AWS_ENDPOINT_URL"]
