"""A lane's start rate through the real handler and boto3 against moto: bursts, waits, races, shares."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
from freezegun import freeze_time

from dispatcher.adapters.rate import RateBucket
from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS
from dispatcher.local.account import REGION
from dispatcher.local.stack import create_lane, read_all
from tests.support.harness import lanes, running_of, send
from tests.support.moto_harness import Harness
from tests.support.rate_bound import worst_window_excess

ONE_TICK = 10.5
"""An invocation's time for one tick and no other (the margin is 10 s): under a frozen clock a
lane that waits for its rate's next token would otherwise be ticked for until the clock moves."""


def test_a_rate_capped_lane_starts_its_burst_then_at_its_rate_across_cold_starts(harness: Harness) -> None:
    """A rate capped lane starts its burst then at its rate across cold starts."""
    paced = create_lane(harness.stack.name, "paced", starts_per_second=2)
    lanes(harness, 10, {"lanes": [paced]})
    send(paced["queue_url"], [f"p-{index}" for index in range(6)], group="one-group")
    with freeze_time("2026-11-24 12:00:00") as clock:
        assert harness.tick(remaining_seconds=ONE_TICK)["started"] == 2, "the burst: b = max(1, r) = 2"
        assert harness.tick(remaining_seconds=ONE_TICK)["started"] == 0, (
            "a cold start finds the bucket in the state table, empty"
        )
        clock.tick(0.5)
        assert harness.tick(remaining_seconds=ONE_TICK)["started"] == 1
        clock.tick(10.0)
        assert harness.tick(remaining_seconds=ONE_TICK)["started"] == 2, (
            "never more than the burst, however long it waited"
        )
    assert harness.started_jobs() == ["p-0", "p-1", "p-2", "p-3", "p-4"], "in send order"
    assert harness.queue_counts(paced["queue_url"]) == (1, 0), "the job waiting for the rate stays queued"
    assert read_all(paced["dead_letter_queue_url"]) == []


def test_a_lane_that_waits_for_its_rate_keeps_its_invocation_ticking_at_the_rate(harness: Harness) -> None:
    """Jobs that wait only for tokens: the keeper ticks again as each token comes, not once a minute.

    One invocation with 14 s left (a margin of 10 s, a second for a tick) starts the burst
    of 4, then one start as each token comes (4 a second), never more than b + r·t in any
    window; without the rate's ticks it would have started the burst alone.
    """
    paced = create_lane(harness.stack.name, "paced", starts_per_second=4)
    lanes(harness, 50, {"lanes": [paced]})
    send(paced["queue_url"], [f"p-{index}" for index in range(30)], group="one-group")
    moments: list[float] = []
    harness.on("before-call.states.StartExecution", lambda **_: moments.append(time.monotonic()))
    result = harness.tick(remaining_seconds=14.0)
    assert result["ticks"] > 2, "it ticked again for the rate"
    assert 4 + 4 <= result["started"] < 30, "a second's worth after the burst at least, not the queue"
    assert harness.started_jobs() == [f"p-{index}" for index in range(result["started"])], "in send order"
    assert worst_window_excess(moments, 4.0) <= 4.0 + 0.5, "b + r·t, give or take a start's own latency"


def test_a_holder_ticking_for_a_rate_sees_the_lane_paused_within_the_parameters_cache(
    harness: Harness,
) -> None:
    """A pause written while the keeper keeps ticking for a lane's rate holds within 5 s and a tick.

    The control parameter is read again for each tick (through its cache); read once per
    invocation, the lane would start for the whole nine seconds the invocation ticks.
    """
    paced = create_lane(harness.stack.name, "paced", starts_per_second=4)
    lanes(harness, 50, {"lanes": [paced]})
    send(paced["queue_url"], [f"p-{index}" for index in range(60)], group="one-group")
    moments: list[float] = []
    paused: list[float] = []

    def note(**_: Any) -> None:
        moments.append(time.monotonic())
        if len(moments) == 4 + 1:
            value = json.dumps({"lanes": {"paced": {"paused": True}}})
            harness.ssm.put_parameter(
                Name=harness.stack.control_parameter, Value=value, Type="String", Overwrite=True
            )
            paused.append(time.monotonic())

    harness.on("before-call.states.StartExecution", note)
    began = time.monotonic()
    result = harness.tick(remaining_seconds=20.0)
    assert paused, "the lane started past its burst before the pause"
    late = [moment for moment in moments if moment > paused[0] + CONTROL_MAX_AGE_SECONDS + 1.5]
    assert late == []
    assert time.monotonic() - began < 9, "the invocation stopped ticking for the paused lane"
    assert result["started"] < 60


def test_slots_a_rate_capped_lane_cannot_use_go_to_the_other_lanes(harness: Harness) -> None:
    """Slots a rate capped lane cannot use go to the other lanes."""
    paced = create_lane(harness.stack.name, "paced", starts_per_second=1, priority=9)
    lanes(harness, 5, {"lanes": [paced]})
    send(paced["queue_url"], [f"p-{index}" for index in range(5)])
    send(harness.stack.queue_url, [f"a-{index}" for index in range(5)])
    with freeze_time("2026-11-24 12:00:00"):
        assert harness.tick(remaining_seconds=ONE_TICK)["started"] == 5
    assert running_of(harness, paced["state_machine_arn"]) == 1
    assert harness.running() == 4


def test_two_takes_that_race_never_spend_the_same_tokens(harness: Harness) -> None:
    """Two takes that race never spend the same tokens."""
    first = RateBucket(harness.dynamodb, harness.stack.state_table, "paced", 3.0)
    second = RateBucket(harness.dynamodb, harness.stack.state_table, "paced", 3.0)
    assert first.take(1, 999.0) == 1
    stale = first._read()
    assert stale is not None
    assert first.take(2, 1000.0) == 2
    reads: list[Any] = []
    original = second._read

    def read() -> Any:
        reads.append(stale if not reads else original())
        return reads[-1]

    second._read = read  # type: ignore[method-assign]
    assert second.take(3, 1000.0) == 1, "its write lost the race: it read again and took what was left"
    assert len(reads) == 2
    assert first.available(1000.0) == 0
    assert first.available(1000.34) == 1


def test_a_lane_whose_rate_runs_out_mid_tick_says_its_jobs_wait_for_capacity(harness: Harness) -> None:
    """A start call that ends in a name collision spends a token too: the rest wait, in order.

    The tick stops with ``capacity`` (jobs wait, as for a slot), not ``waiting`` (which says
    that nothing it received could be decided).
    """
    paced = create_lane(harness.stack.name, "paced", starts_per_second=2)
    lanes(harness, 10, {"lanes": [paced]})
    harness.sfn.start_execution(
        stateMachineArn=paced["state_machine_arn"], name="taken", input='{"job": "other"}'
    )
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.send_message(
        QueueUrl=paced["queue_url"],
        MessageBody='{"job": "taken"}',
        MessageGroupId="a",
        MessageDeduplicationId="taken",
        MessageAttributes={"ExecutionName": {"DataType": "String", "StringValue": "taken"}},
    )
    send(paced["queue_url"], ["p-1", "p-2"], group="a")
    with freeze_time("2026-11-24 12:00:00"):
        result = harness.tick(remaining_seconds=ONE_TICK)
    assert (result["dead_lettered"], result["started"], result["stopped"]) == (1, 1, "capacity")
    assert harness.started_jobs()[-1] == "p-1"
    assert harness.queue_counts(paced["queue_url"]) == (1, 0)
