"""Lanes and pools over the in-memory AWS: several queues and state machines, each pool's cap at every start.

The unchanged tick service, deployed with ``LANES`` as the template deploys it, in virtual
time. The world checks each pool's cap at the moment of every start (`InMemoryAws.cap_pools`);
the end state is checked per lane: every job started once, with its body, each group in
send order, every queue drained.
"""

from __future__ import annotations

import json
import random

from dispatcher.core.lanes import DEFAULT
from tests.sim.conftest import settings
from tests.support.sim.aws import InMemoryAws, SimLane
from tests.support.sim.function import EventSourceMapping, Function
from tests.support.world import EventPlan, Lag


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
