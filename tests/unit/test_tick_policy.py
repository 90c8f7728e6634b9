"""When an invocation ticks again: the loop policy, and a wake's second (pure: no AWS)."""

from __future__ import annotations

import contextlib

import pytest

from dispatcher.core.events import WAKE_INTERVAL_SECONDS, Wake, wake_deadline
from dispatcher.core.lanes import parse_lanes
from dispatcher.core.topology import DEFAULT, Lane
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


def test_the_wake_deadline_is_the_newest_wake_s_second() -> None:
    """What a producer queued until its last wake's second ended rides on it; no wake: no deadline."""
    assert wake_deadline([]) is None
    assert (
        wake_deadline([Wake(sent_at=10.0), Wake("a", 12.5), Wake(sent_at=11.0)])
        == 12.5 + WAKE_INTERVAL_SECONDS
    )


@pytest.mark.parametrize(
    ("stopped", "wake_until", "expected"),
    [
        (StopReason.DRAINED, NOW + 0.4, pytest.approx(0.4)),
        (StopReason.DRAINED, NOW, None),
        (StopReason.DRAINED, NOW - 3, None),
        (StopReason.DRAINED, None, None),
        (StopReason.CAPACITY, NOW + 0.4, None),
        (StopReason.PAUSED, NOW + 0.4, None),
        (StopReason.TIME, NOW + 0.4, None),
    ],
    ids=["drained-within", "drained-at-its-end", "drained-after", "no-wake", "capacity", "paused", "time"],
)
def test_a_drained_tick_ticks_again_when_the_wake_s_second_has_passed_and_only_then(
    stopped: StopReason, wake_until: float | None, expected: object
) -> None:
    """Only a tick that found the queues empty with slots free, before the wake's second ended, waits for it.

    A full pool (capacity) refills on ends; a paused one starts nothing; one out of time stops.
    """
    policy = TickPolicy(topology=TOPOLOGY)
    assert policy.next_tick_in(stopped, NOW, runtime(), wake_until) == expected


def test_the_loop_policy_still_ticks_every_interval_while_jobs_wait_within_its_seconds() -> None:
    """With ``loop_seconds``, a tick that waited for slots ticks again after ``interval``, while it may."""
    policy = TickPolicy(topology=TOPOLOGY, loop_seconds=10.0, list_reuse_seconds=2.0)
    assert policy.interval == 2.0
    assert policy.next_tick_in(StopReason.CAPACITY, NOW - 7.9, runtime(), None) == 2.0
    assert policy.next_tick_in(StopReason.CAPACITY, NOW - 8.0, runtime(), None) is None
    assert policy.next_tick_in(StopReason.DRAINED, NOW, runtime(), None) is None
    assert TickPolicy(topology=TOPOLOGY).next_tick_in(StopReason.CAPACITY, NOW, runtime(), None) is None


def test_no_tick_again_that_would_eat_into_the_invocation_s_time_margin() -> None:
    """Either reason to tick again gives way when the wait would leave less than the margin."""
    policy = TickPolicy(topology=TOPOLOGY, time_margin_seconds=10.0, loop_seconds=30.0)
    assert policy.next_tick_in(StopReason.DRAINED, NOW, runtime(remaining=10.5), NOW + 0.4) == pytest.approx(
        0.4
    )
    assert policy.next_tick_in(StopReason.DRAINED, NOW, runtime(remaining=10.3), NOW + 0.4) is None
    assert policy.next_tick_in(StopReason.CAPACITY, NOW, runtime(remaining=11.0), None) is None
    assert policy.next_tick_in(StopReason.CAPACITY, NOW, runtime(remaining=11.5), None) == 1.0
