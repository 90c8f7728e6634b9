"""The tick's own paces and reads over the in-memory AWS: fewer calls where quotas are small, same cap."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS
from dispatcher.core.pacing import Paces
from dispatcher.tick.count import Counter, Records
from dispatcher.tick.warm import WarmState
from tests.support.plans import EventPlan, Lag
from tests.support.records import starts_at
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.checks import every_job_started_once_in_order, in_process
from tests.support.sim.deployment import backlog, function
from tests.support.sim.dynamodb import LedgerView
from tests.support.sim.function import EventSourceMapping

pytestmark = pytest.mark.no_cover
"""Scale and whole runs of the in-memory AWS: untraced (tracing doubles a test's CPU time, and the
same lines run, measured, in tests/unit and tests/integration; CONTRIBUTING, "The suite's time")."""


def test_describe_checks_keep_to_their_pace_and_unchecked_starts_count_as_running() -> None:
    """The Describe pace bounds the checks; what it leaves counts as running, and the cap holds.

    No end events and a list that omits new executions for 60 s: every start the list
    doesn't show would be described on every tick. Every job still starts, once, in order.
    """
    aws = InMemoryAws(lag=Lag(start=60.0), seed=3)
    backlog(aws, 1200, groups=60, seconds=2.0)
    dispatcher = function(aws, 300, refill=False, loop_seconds=40)
    seconds = 600.0
    dispatcher.schedule(60.0, until=aws.scheduler.now + seconds)
    aws.scheduler.run_until(aws.scheduler.now + seconds)
    pace = Paces.of_region("us-east-1").describe
    described = aws.usage.calls["DescribeExecution"]
    assert described > 0, "nothing was described: the test no longer reaches the pace"
    assert described <= pace.rate * seconds + pace.burst * dispatcher.containers
    assert aws.world.violations == []
    every_job_started_once_in_order(aws)
    aws.scheduler.stop()
    assert aws.scheduler.errors == dispatcher.errors == []


def test_a_lease_holder_reads_the_window_whole_once_then_only_what_is_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After an invocation's first read of the state table's window, its reads begin near its last one.

    Under churn one invocation ticks many times for the end batches; the cap still holds.
    """
    reads: list[tuple[float, float]] = []
    original = LedgerView.window
    aws = InMemoryAws(events=EventPlan(enabled=True, delay=1.0), seed=5)

    def window(self: LedgerView, oldest: float) -> Any:
        reads.append((aws.scheduler.now, oldest))
        return original(self, oldest)

    monkeypatch.setattr(LedgerView, "window", window)
    backlog(aws, 3000, groups=100, seconds=5.0)
    dispatcher = function(aws, 500, mapping=EventSourceMapping())
    dispatcher.schedule(60.0, until=aws.scheduler.now + 120)
    aws.scheduler.run_until(aws.scheduler.now + 120)
    whole = [now for now, oldest in reads if oldest <= now - RECENT_START_WINDOW_SECONDS]
    partial = [now - oldest for now, oldest in reads if oldest > now - RECENT_START_WINDOW_SECONDS]
    assert partial, "no invocation ticked twice: the test no longer reaches an incremental read"
    assert max(partial) < RECENT_START_WINDOW_SECONDS
    ticking = [run for run in dispatcher.invocations if run.report and run.report["stopped"] != "busy"]
    assert len(whole) <= len(ticking)  # one whole read per invocation that held the lease, at most
    assert aws.world.violations == []
    aws.scheduler.stop()
    assert aws.scheduler.errors == dispatcher.errors == []


def test_a_start_seen_running_is_described_again_only_after_a_fresher_listing() -> None:
    """Ticks on one listing describe a start the list doesn't show once; a fresh listing checks it again."""
    aws = InMemoryAws(lag=Lag(start=60.0), seed=1)  # the list shows no new execution for a minute
    ports = aws.ports(aws.clients())
    warm = WarmState()
    records = Records(ports.reads, ports.ledger, ports.member_queues)
    counter = Counter(
        ports.default.state_machine,
        records,
        warm,
        max_concurrency=10,
        list_reuse_seconds=5.0,
        clock=lambda: aws.scheduler.now,
    )
    counts: list[tuple[int, int]] = []
    arn = counter.state_machine_arn

    def running() -> int:
        now = aws.scheduler.now
        return counter.count(records.read(now, {arn: counter.review_from(now)}).windows[arn]).running

    def body() -> None:
        table = ports.ledger
        records = starts_at(table, {f"job-{index}": "g" for index in range(3)}, aws.scheduler.now)
        assert table.record(records) == []
        for record in records:
            ports.default.admissions.start(record.name, json.dumps({"seconds": 300}))
        aws.scheduler.sleep(1.0)
        for _ in range(3):  # one listing, read at the first of these ticks
            counts.append((running(), aws.usage.calls["DescribeExecution"]))
            aws.scheduler.sleep(1.0)
        aws.scheduler.sleep(5.0)
        counts.append((running(), aws.usage.calls["DescribeExecution"]))

    in_process(aws, body)
    assert counts == [(3, 3), (3, 3), (3, 3), (3, 6)]
    assert aws.world.violations == []
