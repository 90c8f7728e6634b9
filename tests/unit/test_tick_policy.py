"""When an invocation ticks again: the loop policy (pure: no AWS)."""

from __future__ import annotations

import contextlib

from dispatcher.core.topology import DEFAULT, Lane, parse_lanes
from dispatcher.tick.policy import TickPolicy
from dispatcher.tick.ports import Runtime
from dispatcher.tick.report import StopReason

TOPOLOGY = parse_lanes(
    None,
    Lane(
        name=DEFAULT,
        pool=DEFAULT,
        queue_url="https://sqs/q.fifo",
        dead_letter_queue_url="https://sqs/d.fifo",
        state_machine_arn="arn:aws:states:us-east-1:123456789012:stateMachine:sm",
    ),
    5,
)
NOW = 1_000.0


def runtime(remaining: float = 60.0) -> Runtime:
    """An invocation at ``NOW`` with ``remaining`` seconds left (no sleeping, no threads here)."""
    return Runtime(
        clock=lambda: NOW,
        sleep=lambda _: None,
        remaining_seconds=lambda: remaining,
        pool=lambda _: contextlib.nullcontext(),  # type: ignore[arg-type,return-value]
    )


def test_the_loop_policy_still_ticks_every_interval_while_jobs_wait_within_its_seconds() -> None:
    """With ``loop_seconds``, a tick that waited for slots ticks again after ``interval``, while it may."""
    policy = TickPolicy(topology=TOPOLOGY, loop_seconds=10.0, list_reuse_seconds=2.0)
    assert policy.interval == 2.0
    assert policy.next_tick_in(StopReason.CAPACITY, NOW - 7.9, runtime()) == 2.0
    assert policy.next_tick_in(StopReason.CAPACITY, NOW - 8.0, runtime()) is None
    assert policy.next_tick_in(StopReason.DRAINED, NOW, runtime()) is None
    assert TickPolicy(topology=TOPOLOGY).next_tick_in(StopReason.CAPACITY, NOW, runtime()) is None


def test_no_tick_again_that_would_eat_into_the_invocation_s_time_margin() -> None:
    """Ticking again gives way when the wait would leave less than the margin."""
    policy = TickPolicy(topology=TOPOLOGY, time_margin_seconds=10.0, loop_seconds=30.0)
    assert policy.next_tick_in(StopReason.CAPACITY, NOW, runtime(remaining=11.0)) is None
    assert policy.next_tick_in(StopReason.CAPACITY, NOW, runtime(remaining=11.5)) == 1.0
