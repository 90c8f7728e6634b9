"""Overlapping ticks in separate processes, through the faulty emulator on the real clock.

What reserved concurrency 1 used to guarantee, the tick lease now does: two dispatcher
processes ticking at once never start more than MAX between them, and a process killed
while it holds the lease holds up the others only until its invocation's time is up.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from typing import Any

import boto3
import pytest

from dispatcher import handler
from dispatcher.in_process import LocalContext
from dispatcher.local.account import REGION, environment
from dispatcher.local.stack import Stack, create_stack
from tests.support.exchanges import Request
from tests.support.faulty_aws import FaultyAws
from tests.support.overlap import (
    overlap_round,
    real_time,
    send_jobs,
    ticker,
)
from tests.support.plans import FaultPlan, Lag
from tests.support.world import World

pytestmark = pytest.mark.no_cover
"""Whole fault scenarios: untraced (tracing doubles a test's CPU time, and the same lines run,
measured, in the tests of each part; CONTRIBUTING, "The suite's time")."""


def test_overlapping_ticks_in_two_processes_never_exceed_max(faulty_aws: FaultyAws) -> None:
    """Two processes tick as fast as they can, the list lagging: never above MAX, every job started once."""
    outcome = overlap_round(faulty_aws, faulty_aws_endpoint(), seed=1)
    assert outcome.violations == []
    assert outcome.busy > 0, "the processes never overlapped"


def test_holder_killed_mid_tick_delays_the_next_tick_only_until_its_lease_expires(
    faulty_aws: FaultyAws,
) -> None:
    """A process killed inside StartExecution holds the lease until its deadline, no longer; the cap holds.

    Checked against the deadline the keeper wrote and the clock reading each later attempt
    to take the lease sent, not against guesses of how fast a process starts: the next
    ticks run here, one after another from the moment of the kill, until one takes it.
    """
    world = World(seed=3, start=time.time(), clock=time.time, faults=FaultPlan(lag=Lag(start=2.0)))
    world.max_concurrency = 4
    stack = create_stack(f"killed-{os.getpid()}")
    send_jobs(stack, jobs=2, seconds=60)
    inside = threading.Event()
    release = threading.Event()

    def hold_first_start(request: Request) -> None:
        if request.operation == "StartExecution" and not inside.is_set():
            inside.set()
            release.wait(30)

    with real_time(faulty_aws, world):
        faulty_aws.before = hold_first_start
        keeper = ticker(
            faulty_aws_endpoint(), stack, 4, "--ticks", "1", "--timeout", "10", time_margin_seconds=0.5
        )
        assert inside.wait(60), "the keeper never reached StartExecution"
        keeper.send_signal(signal.SIGKILL)
        keeper.wait(10)
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
    # Each attempt to take the lease: refused while the dead keeper's deadline lasts, taken after it.
    assert attempts, "no tick tried to take the lease"
    assert [taken for _, taken in attempts] == [now > held_until for now, _ in attempts]
    assert world.violations == []


def _lease_deadline(stack: Stack) -> float:
    """When the tick lease's keeper must have let go (what it wrote when it took the lease)."""
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
    """The fault middleware's endpoint that the overlapping tickers call."""
    return os.environ["AWS_ENDPOINT_URL"]
