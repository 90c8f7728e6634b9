"""Lanes and pools over the in-memory AWS: several queues and state machines, each pool's cap at every start.

The unchanged tick service, deployed with ``LANES`` as the template deploys it, in virtual
time. The world checks each pool's cap at the moment of every start (`InMemoryAws.cap_pools`);
the end state is checked per lane: every job started once, with its body, each group in
send order, every queue drained.
"""

from __future__ import annotations

import contextlib
import json
import random

import pytest

from dispatcher.core import rate
from dispatcher.core.topology import DEFAULT
from dispatcher.tick.invocation import dispatcher_for, steered
from dispatcher.tick.ports import Runtime
from dispatcher.tick.warm import WarmState
from tests.support.plans import EventPlan, Lag
from tests.support.rate_bound import worst_window_excess
from tests.support.sim.aws import InMemoryAws, SimLane
from tests.support.sim.deployment import settings
from tests.support.sim.function import EventSourceMapping, Function
from tests.support.sim.scheduler import SimPool

pytestmark = pytest.mark.no_cover
"""Scale and whole runs of the in-memory AWS: untraced (tracing doubles a test's CPU time, and the
same lines run, measured, in tests/unit and tests/integration; CONTRIBUTING, "The suite's time")."""


def deploy(aws: InMemoryAws, default_max: int, **fields: object) -> Function:
    """The function with every lane of ``aws`` in ``LANES``; the world checks each pool's cap."""
    aws.cap_pools(default_max)
    return Function(
        aws,
        settings(aws, default_max, lanes=aws.lanes_document(), **fields),
        mapping=EventSourceMapping(),
    )


def send(aws: InMemoryAws, lane: str, jobs: int, *, groups: int, rng: random.Random) -> None:
    """``jobs`` jobs on ``lane``'s queue, round robin over ``groups`` groups, each running 1-10 s."""
    for job in range(jobs):
        body = json.dumps({"lane": lane, "job": job, "seconds": round(rng.uniform(1, 10), 3)})
        aws.lane_queues[lane].send(body, f"{lane}-g{job % groups}")


def every_lane_drained_once_in_order(aws: InMemoryAws) -> None:
    """Per lane: every job started once on its lane's state machine, its body the input, groups in order."""
    started = aws.started()
    for lane, queue in aws.lane_queues.items():
        ours = [execution for execution in started if json.loads(execution.input)["lane"] == lane]
        by_job = {json.loads(execution.input)["job"]: execution for execution in ours}
        sent = {json.loads(message.body)["job"]: message for message in queue.sent}
        assert len(ours) == len(by_job) == len(sent), lane
        assert all(by_job[job].input == message.body for job, message in sent.items()), lane
        assert all(
            execution.arn.startswith(aws.lane_machines[lane].replace(":stateMachine:", ":execution:"))
            for execution in ours
        ), lane
        for group in {message.group for message in queue.sent}:
            jobs = [json.loads(message.body)["job"] for message in queue.sent if message.group == group]
            assert [by_job[job].sequence for job in jobs] == sorted(by_job[job].sequence for job in jobs)
        assert queue.depth() == (0, 0), lane


def test_lanes_in_several_pools_drain_under_each_pools_cap_with_lag_and_lossy_late_events() -> None:
    """Six lanes in three pools (one sharing a state machine): lists that lag, events lost and late."""
    aws = InMemoryAws(
        lag=Lag(start=20.0, end=40.0, describe=10.0, flaky=True),
        events=EventPlan(enabled=True, lost=0.2, duplicated=0.3, delay=10.0),
        seed=21,
        lanes=[
            SimLane("urgent", priority=5, shares=DEFAULT),
            SimLane("glue-a", pool="glue"),
            SimLane("glue-b", pool="glue", priority=1, max_concurrency=8),
            SimLane("partner-a", pool="partner"),
            SimLane("partner-b", pool="partner"),
        ],
        pools={"glue": 20, "partner": 12},
    )
    rng = random.Random(21)
    for lane in aws.lane_queues:
        send(aws, lane, 300, groups=40, rng=rng)
    dispatcher = deploy(aws, 30)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 1500)
    aws.scheduler.run_until(aws.scheduler.now + 1500)
    aws.scheduler.stop()
    assert aws.world.violations == []
    assert dispatcher.errors == aws.scheduler.errors == []
    every_lane_drained_once_in_order(aws)


def test_a_lanes_own_max_holds_inside_its_pool() -> None:
    """A lane of MAX 3 in a pool of MAX 10, both lanes backlogged: it never has more than 3 RUNNING."""
    aws = InMemoryAws(
        events=EventPlan(enabled=True, delay=1.0),
        lanes=[SimLane("capped", pool="shared", max_concurrency=3), SimLane("other", pool="shared")],
        pools={"shared": 10},
    )
    rng = random.Random(3)
    send(aws, "capped", 60, groups=60, rng=rng)
    send(aws, "other", 60, groups=60, rng=rng)
    dispatcher = deploy(aws, 5)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 240)
    capped = aws.lane_machines["capped"]
    most = {"capped": 0}

    def watch() -> None:
        running = sum(
            execution.arn.startswith(capped.replace(":stateMachine:", ":execution:"))
            for execution in aws.world.running()
        )
        most["capped"] = max(most["capped"], running)
        aws.scheduler.call_at(aws.scheduler.now + 0.1, watch)

    watch()
    aws.scheduler.run_until(aws.scheduler.now + 240)
    aws.scheduler.stop()
    assert most["capped"] == 3
    assert aws.world.violations == []
    every_lane_drained_once_in_order(aws)


def test_an_urgent_lane_overtakes_a_backfill_that_keeps_its_pool_full() -> None:
    """Urgent jobs sent while a backfill fills pool default start before the backfill's older jobs."""
    aws = InMemoryAws(events=EventPlan(enabled=True, delay=1.0), lanes=[SimLane("urgent", priority=1)])
    rng = random.Random(4)
    send(aws, DEFAULT, 400, groups=100, rng=rng)
    dispatcher = deploy(aws, 20)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 300)
    aws.scheduler.run_until(aws.scheduler.now + 30)
    sent_at = aws.scheduler.now
    send(aws, "urgent", 10, groups=10, rng=rng)
    backfill_waiting = aws.lane_queues[DEFAULT].depth()[0]
    aws.scheduler.run_until(aws.scheduler.now + 270)
    aws.scheduler.stop()
    urgent = [execution for execution in aws.started() if json.loads(execution.input)["lane"] == "urgent"]
    backfill_after = [
        execution
        for execution in aws.started()
        if json.loads(execution.input)["lane"] == DEFAULT and execution.started_at > sent_at
    ]
    assert backfill_waiting > 100
    assert len(urgent) == 10
    assert (
        max(execution.sequence for execution in urgent)
        < sorted(execution.sequence for execution in backfill_after)[10]
    )
    assert aws.world.violations == []


def test_a_rate_capped_lane_keeps_its_rate_across_containers() -> None:
    """A lane of 0.5 starts a second beside a busy one: never above b + r·t in any window, over minutes."""
    aws = InMemoryAws(
        events=EventPlan(enabled=True, delay=1.0),
        lanes=[SimLane("paced", pool="paced", starts_per_second=0.5)],
        pools={"paced": 50},
    )
    rng = random.Random(5)
    send(aws, "paced", 200, groups=50, rng=rng)
    send(aws, DEFAULT, 600, groups=100, rng=rng)
    dispatcher = deploy(aws, 30)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 300)
    aws.scheduler.run_until(aws.scheduler.now + 300)
    aws.scheduler.stop()
    paced = [
        execution.started_at for execution in aws.started() if json.loads(execution.input)["lane"] == "paced"
    ]
    assert dispatcher.containers > 1
    assert worst_window_excess(paced, 0.5) <= rate.burst(0.5) + 1e-9
    assert len(paced) >= 0.9 * 0.5 * 300, "it runs near its rate, not far below (it was 74 of 150)"
    assert aws.world.violations == []


def test_a_slow_rate_waiting_for_its_token_does_not_hold_back_the_other_lanes_refills() -> None:
    """A lane of one start every 20 s keeps the keeper waiting: an end elsewhere still gets a tick soon."""
    aws = InMemoryAws(
        events=EventPlan(enabled=True, delay=0.2),
        lanes=[SimLane("paced", pool="paced", starts_per_second=0.05)],
        pools={"paced": 10},
    )
    rng = random.Random(6)
    send(aws, "paced", 40, groups=40, rng=rng)
    for job in range(60):
        aws.lane_queues[DEFAULT].send(json.dumps({"lane": DEFAULT, "job": job, "seconds": 3.0}), f"g{job}")
    dispatcher = deploy(aws, 2)
    dispatcher.schedule(60.0, until=aws.scheduler.now + 60)
    aws.scheduler.run_until(aws.scheduler.now + 60)
    aws.scheduler.stop()
    default_starts = sorted(
        execution.started_at for execution in aws.started() if json.loads(execution.input)["lane"] == DEFAULT
    )
    ends = sorted(start + 3.0 for start in default_starts)
    refills = [
        next(start for start in default_starts if start >= end) - end
        for end in ends
        if end < default_starts[-1]
    ]
    assert len(default_starts) > 20
    assert max(refills) < 3.0, "an end's slot is refilled within its batch's delivery and a look for asks"
    assert aws.world.violations == []


def test_a_rate_capped_lane_takes_its_tokens_after_the_start_pace_and_starts_at_once(
    aws: InMemoryAws,
) -> None:
    """A round the `StartExecution` pace holds back a second: the tokens are taken after the wait, not before.

    Taken before, the calls would come a second after their tokens, in a cluster with the
    next round's: more than b + r·t in a window at the calls.
    """
    paced = InMemoryAws(lanes=[SimLane("paced", pool="paced", starts_per_second=2.0)], pools={"paced": 50})
    rng = random.Random(7)
    send(paced, "paced", 10, groups=10, rng=rng)
    send(paced, DEFAULT, 10, groups=10, rng=rng)
    fields = settings(paced, 20, lanes=paced.lanes_document())
    topology = steered(fields, None)
    warm = WarmState()
    pace = warm.paces_for(paced.state_machine_arn).start
    began = paced.scheduler.now
    pace.reserve(began, int(pace.burst + pace.rate))  # this account's pace owes a second of starts
    runtime = Runtime(
        clock=lambda: paced.scheduler.now,
        sleep=paced.scheduler.sleep,
        remaining_seconds=lambda: began + 11.5 - paced.scheduler.now,  # time for one tick
        pool=lambda width: contextlib.nullcontext(SimPool(paced.scheduler, width)),
    )
    resources = paced.resources(paced.clients())
    dispatcher = dispatcher_for(fields, topology=topology, resources=resources, runtime=runtime, warm=warm)
    reports: list[dict[str, object]] = []
    paced.scheduler.spawn(lambda: reports.append(dispatcher.run().as_dict()), "invocation")
    paced.scheduler.run_until(began + 30)
    paced.scheduler.stop()
    taken_at = paced.rates.buckets["paced"].at
    starts = [
        execution.started_at
        for execution in paced.started()
        if json.loads(execution.input)["lane"] == "paced"
    ]
    assert reports[0]["started"] == 10 + 2
    assert taken_at >= began + 0.9, "the tokens were taken once the pace's wait was over"
    assert len(starts) == 2
    assert all(0 < start - taken_at < 0.1 for start in starts), "the calls follow their tokens at once"
