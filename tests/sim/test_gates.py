"""A gate over the in-memory AWS: admissions under its pool's cap, and places that come back by themselves.

The unchanged tick service with a gate in ``LANES``, its requests on a FIFO queue, its
releases and ends through the end-event queue's mapping, in virtual time. The world checks
the pool's cap at every admission (who is truly inside, `tests.support.gate_world`).
"""

from __future__ import annotations

import random

import pytest

from dispatcher.core.quotas import step_functions
from dispatcher.core.rosters import CHECK_AFTER_SECONDS
from dispatcher.core.topology import DEFAULT
from tests.support.plans import EventPlan, Lag
from tests.support.sim.aws import InMemoryAws, SimGate
from tests.support.sim.deployment import settings
from tests.support.sim.function import EventSourceMapping, Function
from tests.support.sim.gated import GatedExecutions, GatedWorkload

pytestmark = pytest.mark.no_cover
"""Scale and whole runs of the in-memory AWS: untraced (tracing doubles a test's CPU time, and the
same lines run, measured, in tests/unit and tests/integration; CONTRIBUTING, "The suite's time")."""

GATE = "crawl"


def gated(
    workload: GatedWorkload, *, max_concurrency: int, lag: Lag | None = None, seed: int = 5
) -> tuple[InMemoryAws, Function, GatedExecutions]:
    """A gate in pool default of MAX ``max_concurrency``, deployed as the template deploys one."""
    aws = InMemoryAws(
        lag=lag or Lag(start=1.0, end=5.0, describe=1.0),
        events=EventPlan(enabled=True, delay=1.0),
        seed=seed,
        gates=[SimGate(GATE)],
    )
    aws.cap_pools(max_concurrency)
    function = Function(
        aws,
        settings(aws, max_concurrency, lanes=aws.lanes_document(), receive_wait_seconds=1),
        mapping=EventSourceMapping(),
    )
    return aws, function, GatedExecutions(aws, function, GATE, workload, random.Random(seed))


def test_a_gate_admits_its_waiting_executions_at_its_pools_pace_and_never_over_its_cap() -> None:
    """200 executions wait at a gate of MAX 20 with 5-15 s sections: all admitted once, in 3 minutes."""
    aws, function, executions = gated(GatedWorkload(), max_concurrency=20)
    try:
        executions.start(200)
        function.schedule(60.0, until=aws.scheduler.now + 240)
        aws.scheduler.run_until(aws.scheduler.now + 240)
    finally:
        aws.scheduler.stop()
    gates = executions.gates
    assert aws.world.violations == []
    assert len(gates.admissions) == 200
    assert set(gates.accepted.values()) == {1}
    assert aws.gate_queues[GATE].depth() == (0, 0)
    # 200 sections of 10 s on average through 20 places is 100 s: refilled on each release.
    assert gates.admissions[-1][0] - gates.admissions[0][0] < 150
    assert function.errors == []


def test_a_place_held_by_an_execution_that_died_inside_comes_back_with_its_event_or_without() -> None:
    """Aborted inside: freed at once by its end event; with the event lost, by a check within a minute."""
    workload = GatedWorkload(section=(20.0, 40.0), dies_inside=0.3, silent=0.5)
    aws, function, executions = gated(workload, max_concurrency=10)
    try:
        executions.start(100)
        function.schedule(60.0, until=aws.scheduler.now + 900)
        aws.scheduler.run_until(aws.scheduler.now + 900)
    finally:
        aws.scheduler.stop()
    assert aws.world.violations == []
    assert len(executions.gates.admissions) == 100
    freed = aws.table.inside_partition(GATE).deleted
    loud = [freed[death.arn.rsplit(":", 1)[1]] - death.at for death in executions.deaths if not death.silent]
    silent = [freed[death.arn.rsplit(":", 1)[1]] - death.at for death in executions.deaths if death.silent]
    assert loud
    assert silent
    assert max(loud) < 5.0
    assert max(silent) < CHECK_AFTER_SECONDS + 30.0
    assert DEFAULT in aws.world.pool_caps


LOST_END_SECONDS = 120.0
"""The contract: an execution that ends inside with no event and no release leaves within this."""


def test_with_long_sections_and_many_inside_a_lost_end_is_freed_within_two_minutes() -> None:
    """800 inside for 4-5 minutes, 2,000 waiting, deaths with no event: each freed within 120 s.

    One check at a time can't keep up: 800 inside, each checked every 30 s, is 27
    `DescribeExecution` calls a second against the dispatcher's share of 15. A whole listing
    of the gate's RUNNING executions (a few pages) finds them all.
    """
    workload = GatedWorkload(section=(240.0, 300.0), dies_inside=0.05, silent=1.0)
    aws, function, executions = gated(workload, max_concurrency=800)
    assert step_functions(aws.region)["DescribeExecution"].refill < 800 / CHECK_AFTER_SECONDS
    try:
        end = aws.scheduler.now + 660
        executions.keep_waiting(2000, end)
        function.schedule(60.0, until=end)
        aws.scheduler.run_until(end)
    finally:
        aws.scheduler.stop()
    now = aws.scheduler.now
    freed = aws.table.inside_partition(GATE).deleted
    judged = [death for death in executions.deaths if death.at <= now - LOST_END_SECONDS]
    assert len(judged) >= 20
    waits = [freed.get(death.arn.rsplit(":", 1)[1], now) - death.at for death in judged]
    assert max(waits) <= LOST_END_SECONDS
    assert aws.world.violations == []
    assert function.errors == []
