"""The in-memory AWS is a model, and models drift: one workload on moto and on it, the same calls per start.

The workload: 120 jobs in 12 message groups and two poison messages, at MAX 20, ticked
cold (a new container each tick) until the queue is empty; between ticks every RUNNING
execution ends. On moto, the real handler calls AWS through the boto3 adapters and
botocore counts each call; in memory, the unchanged tick service calls the model's
ports and the model counts each call as AWS would. For every operation, the calls per
start must agree within 10 %.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import Any

import pytest

from dispatcher.settings import variable
from dispatcher.tick.invocation import dispatcher_for, steered
from dispatcher.tick.ports import Runtime
from dispatcher.tick.warm import WarmState
from tests.support.moto_harness import Harness
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.deployment import settings
from tests.support.sim.scheduler import SimPool

pytestmark = pytest.mark.no_cover
"""Scale and whole runs of the in-memory AWS: untraced (tracing doubles a test's CPU time, and the
same lines run, measured, in tests/unit and tests/integration; CONTRIBUTING, "The suite's time")."""

MAX = 20
JOBS = [(json.dumps({"job": index, "seconds": 0}), f"g{index % 12}") for index in range(120)]
POISON = [("{not json", "g3"), ('{"job": "late poison"', "g7")]
TOLERANCE = 0.10
TICKS = 12


def on_moto(harness: Harness) -> tuple[Counter[str], int]:
    """Calls by operation and executions started, on moto through the real handler and adapters."""
    harness.configure(MAX)
    harness.monkeypatch.delenv(variable("control_parameter"))  # the tick's calls only, as in memory
    for body, group in JOBS[:60] + POISON + JOBS[60:]:
        harness.send(body, group=group)
    calls: Counter[str] = Counter()
    harness.on("before-call", lambda model, **_: calls.update([model.name]))
    for _ in range(TICKS):
        harness.tick()
        harness.finish_running()
    assert harness.queue_counts() == (0, 0)
    return calls, len(harness.executions())


def in_memory() -> tuple[Counter[str], int]:
    """Calls by operation and executions started, in memory through the unchanged tick service."""
    aws = InMemoryAws()
    for body, group in JOBS[:60] + POISON + JOBS[60:]:
        aws.queue.send(body, group)
    scheduler = aws.scheduler
    function_settings = settings(aws, MAX)

    def tick() -> None:
        deadline = scheduler.now + 30
        runtime = Runtime(
            clock=lambda: scheduler.now,
            sleep=scheduler.sleep,
            remaining_seconds=lambda: deadline - scheduler.now,
            pool=lambda width: contextlib.nullcontext(SimPool(scheduler, width)),
        )
        topology = steered(function_settings, None)
        dispatcher_for(
            function_settings,
            topology=topology,
            resources=aws.resources(aws.clients()),
            runtime=runtime,
            warm=WarmState(),
        ).run()

    for _ in range(TICKS):
        scheduler.spawn(tick, "tick")
        scheduler.run_until(scheduler.now + 1.0)
    scheduler.stop()
    assert scheduler.errors == []
    assert aws.queue.depth() == (0, 0)
    return aws.usage.calls, len(aws.started())


def per_start(calls: Counter[str], starts: int) -> dict[str, float]:
    """Each operation's calls a start."""
    return {operation: count / starts for operation, count in sorted(calls.items())}


def test_moto_and_the_in_memory_aws_agree_on_calls_per_start(harness: Harness) -> None:
    """Every operation's calls per start on the model are within 10 % of moto's, for the same workload."""
    moto_calls, moto_starts = on_moto(harness)
    model_calls, model_starts = in_memory()
    assert moto_starts == model_starts == len(JOBS)
    moto, model = per_start(moto_calls, moto_starts), per_start(model_calls, model_starts)
    assert moto.keys() == model.keys(), (moto, model)
    drift: dict[str, Any] = {
        operation: (moto[operation], model[operation])
        for operation in moto
        if abs(model[operation] - moto[operation]) > TOLERANCE * moto[operation]
    }
    assert drift == {}, f"calls per start (moto, model) differ by more than 10 %: {drift}"
