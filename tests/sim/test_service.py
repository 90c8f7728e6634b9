"""The unchanged tick service over the in-memory AWS: its guarantees at a scale moto can't reach, in seconds.

Every start is checked against the cap by the world at the moment it happens; the end
state is checked as the fault harness checks it: every job started once, with its body,
each group in send order, the queue empty.
"""

from __future__ import annotations

import json
import random

import pytest

from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS, Control
from dispatcher.core.quotas import Bucket
from dispatcher.tick.policy import LOOP_INTERVAL_SECONDS
from tests.support.plans import EventPlan, Lag
from tests.support.sim.api import LiveBucket
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.checks import every_job_started_once_in_order
from tests.support.sim.deployment import backlog, function
from tests.support.sim.function import EventSourceMapping

pytestmark = pytest.mark.no_cover
"""Scale and whole runs of the in-memory AWS: untraced (tracing doubles a test's CPU time, and the
same lines run, measured, in tests/unit and tests/integration; CONTRIBUTING, "The suite's time")."""


def test_a_large_backlog_drains_under_the_cap_with_lag_and_lossy_late_events() -> None:
    """MAX 200, 6,000 jobs: lists that lag and disagree, events lost, doubled and late; the cap holds."""
    aws = InMemoryAws(
        lag=Lag(start=20.0, end=40.0, describe=10.0, flaky=True),
        events=EventPlan(enabled=True, lost=0.2, duplicated=0.3, delay=30.0),
        seed=11,
    )
    rng = random.Random(11)
    for job in range(6000):
        aws.queue.send(json.dumps({"job": job, "seconds": rng.uniform(5, 15)}), f"g{job % 150}")
    dispatcher = function(aws, 200)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 1200)
    aws.scheduler.run_until(aws.scheduler.now + 1200)
    aws.scheduler.stop()
    assert aws.world.violations == []
    assert dispatcher.errors == aws.scheduler.errors == []
    every_job_started_once_in_order(aws)
    assert sum(
        invocation.report["stopped"] == "busy" for invocation in dispatcher.invocations if invocation.report
    )


def test_a_burst_of_end_events_is_served_by_one_lease_holder() -> None:
    """Hundreds of end events at once: one invocation holds the lease, ticks for the rest; they start none."""
    aws = InMemoryAws(events=EventPlan(enabled=True, delay=1.0))
    backlog(aws, 1500, groups=100, seconds=5.0)
    dispatcher = function(aws, 300, loop_seconds=30)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 60)
    aws.scheduler.run_until(aws.scheduler.now + 60)
    reports = [invocation.report for invocation in dispatcher.invocations]
    busy = [report for report in reports if report and report["stopped"] == "busy"]
    assert len(busy) > 500
    assert all(report["started"] == 0 for report in busy)
    assert aws.world.violations == []
    assert len(aws.started()) >= 1500 - 300  # the last ends come after the minute
    aws.scheduler.stop()
    assert aws.scheduler.errors == []


def test_start_throttling_is_back_pressure_never_loss(aws: InMemoryAws) -> None:
    """StartExecution held to 2 a second: ticks stop at the throttle and release; all start once later."""
    aws.stepfunctions._buckets["StartExecution"] = LiveBucket.of(Bucket(20, 1), aws.scheduler.now)
    backlog(aws, 300, groups=30, seconds=1.0)
    dispatcher = function(aws, 100, loop_seconds=40)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 900)
    aws.scheduler.run_until(aws.scheduler.now + 900)
    assert aws.usage.throttles["StartExecution"] > 0
    assert any(
        invocation.report and invocation.report["stopped"] == "throttled"
        for invocation in dispatcher.invocations
    )
    assert aws.world.violations == []
    every_job_started_once_in_order(aws)


def test_loop_keeps_ticking_while_jobs_wait_for_slots(aws: InMemoryAws) -> None:
    """With LOOP_SECONDS, one invocation refills slots as executions end, until the queue drains."""
    backlog(aws, 3, groups=3, seconds=1.0)
    dispatcher = function(aws, 1, refill=False, loop_seconds=20)
    dispatcher.invoke({})
    aws.scheduler.run_until(aws.scheduler.now + 60)
    [invocation] = dispatcher.invocations
    result = invocation.report
    assert result is not None
    assert result["started"] == 3
    assert result["stopped"] == "drained"
    assert result["ticks"] >= 4
    assert aws.queue.depth() == (0, 0)


@pytest.mark.parametrize("max_concurrency", [0, 5])
def test_paused_starts_nothing_and_loses_nothing(aws: InMemoryAws, max_concurrency: int) -> None:
    """MAX 0 starts nothing and every message stays; MAX 5 starts five (the same backlog)."""
    backlog(aws, 20, groups=4)
    dispatcher = function(aws, max_concurrency)
    dispatcher.invoke({})
    aws.scheduler.run_until(aws.scheduler.now + 5)
    [invocation] = dispatcher.invocations
    assert invocation.report is not None
    assert invocation.report["stopped"] == ("paused" if max_concurrency == 0 else "capacity")
    assert len(aws.started()) == max_concurrency
    assert sum(aws.queue.depth()) == 20 - max_concurrency


def test_the_in_memory_function_reads_the_control_parameter_as_the_handler_does(aws: InMemoryAws) -> None:
    """The simulated function builds its service as the handler does: the parameter's MAX and pause apply."""
    backlog(aws, 20, groups=4)
    dispatcher = function(aws, 10, control_parameter="/dispatcher/control")
    aws.world.max_concurrency = 3
    aws.control = Control(max_concurrency=3)
    dispatcher.invoke({})
    aws.scheduler.run_until(aws.scheduler.now + 5)
    assert len(aws.started()) == 3
    aws.control = Control(max_concurrency=3, paused=True)
    aws.scheduler.run_until(aws.scheduler.now + CONTROL_MAX_AGE_SECONDS + 1)  # Powertools' cache runs out
    dispatcher.invoke({})
    aws.scheduler.run_until(aws.scheduler.now + 5)
    assert dispatcher.invocations[-1].report is not None
    assert dispatcher.invocations[-1].report["stopped"] == "paused"
    assert len(aws.started()) == 3


def test_ends_reach_the_function_in_batches_through_the_event_source_mapping() -> None:
    """Ends go to the end-event queue; batches of them, at most two at once, free every slot they report."""
    aws = InMemoryAws(events=EventPlan(enabled=True, delay=1.0))
    backlog(aws, 1500, groups=100, seconds=5.0)
    mapping = EventSourceMapping(batch_size=200, window_seconds=1.0, max_concurrency=2)
    dispatcher = function(aws, 300, mapping=mapping)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 60)
    aws.scheduler.run_until(aws.scheduler.now + 60)
    batches = [invocation for invocation in dispatcher.invocations if invocation.trigger == "event"]
    assert dispatcher.ends_delivered > 1000
    assert len(batches) <= dispatcher.ends_delivered / 20
    moments = sorted([(run.began, 1) for run in batches] + [(run.ended, -1) for run in batches])
    running = [sum(step for _, step in moments[: index + 1]) for index in range(len(moments))]
    assert max(running) <= mapping.max_concurrency
    assert dispatcher.end_queue_requests["SendMessage"] == dispatcher.ends_delivered
    assert aws.world.violations == []
    assert len(aws.started()) >= 1500 - 300
    aws.scheduler.stop()
    assert aws.scheduler.errors == dispatcher.errors == []


def test_a_holder_that_keeps_ticking_follows_a_pause_within_the_parameters_cache(aws: InMemoryAws) -> None:
    """A looping invocation reads the control parameter again for each tick (cache 5 s): a pause holds.

    Read once per invocation, the pause waited for the loop's end: forty seconds of starts.
    """
    backlog(aws, 300, groups=30, seconds=2.0)
    dispatcher = function(aws, 10, refill=False, loop_seconds=40, control_parameter="/dispatcher/control")
    began = aws.scheduler.now
    dispatcher.invoke({})
    aws.scheduler.run_until(began + 10)
    aws.control = Control(paused=True)
    paused_at = aws.scheduler.now
    aws.scheduler.run_until(began + 60)
    [invocation] = dispatcher.invocations
    assert invocation.report is not None
    assert invocation.report["stopped"] == "paused", "the invocation that was ticking saw the pause"
    assert invocation.ended <= paused_at + CONTROL_MAX_AGE_SECONDS + LOOP_INTERVAL_SECONDS
    late = [
        execution
        for execution in aws.started()
        if execution.started_at > paused_at + CONTROL_MAX_AGE_SECONDS + LOOP_INTERVAL_SECONDS
    ]
    assert len(aws.started()) > 10
    assert late == []
