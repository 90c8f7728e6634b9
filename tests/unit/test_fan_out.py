"""FanOut: how many receives follow a full first one, from what such receives returned before."""

from __future__ import annotations

from dispatcher.core.batching import LONG_POLL_EVERY_SECONDS, PROBE_EVERY, FanOut


def test_a_new_fan_out_receives_the_whole_round_at_once() -> None:
    """Nothing seen yet: the nine receives left of a round of 100, or fewer when fewer are left."""
    assert FanOut().receives(9) == 9
    assert FanOut().receives(3) == 3


def test_the_width_becomes_what_came_back_with_messages() -> None:
    """Three of nine came back with messages: three next time."""
    fan_out = FanOut()
    fan_out.learn(9, 3)
    assert fan_out.receives(9) == 3


def test_the_width_doubles_while_every_receive_returns_messages_up_to_the_round() -> None:
    """All came back with messages: twice as many next time, never more than nine."""
    fan_out = FanOut()
    fan_out.learn(9, 2)
    fan_out.learn(2, 2)
    assert fan_out.receives(9) == 4
    fan_out.learn(4, 4)
    fan_out.learn(8, 8)
    assert fan_out.receives(9) == 9


def test_with_none_returning_messages_one_probe_every_few_rounds_finds_new_groups() -> None:
    """All empty: none in parallel, but one every PROBE_EVERY rounds; a probe that finds messages reopens."""
    fan_out = FanOut()
    fan_out.learn(9, 0)
    asked = [fan_out.receives(9) for _ in range(2 * PROBE_EVERY)]
    assert asked == ([0] * (PROBE_EVERY - 1) + [1]) * 2
    fan_out.learn(1, 1)
    assert fan_out.receives(9) == 1
    fan_out.learn(1, 1)
    assert fan_out.receives(9) == 2


def test_learning_from_no_receive_changes_nothing() -> None:
    """A round that asked for none in parallel tells nothing."""
    fan_out = FanOut(width=5)
    fan_out.learn(0, 0)
    assert fan_out.receives(9) == 5


def test_a_queue_long_polls_unless_it_was_empty_and_another_member_of_the_round_was_not() -> None:
    """Empty last time, beside a busy member: no wait; alone, or with messages last time: a long poll."""
    fan_out = FanOut()
    assert fan_out.waits(others_busy=True, now=0.0)
    fan_out.first_came(0, waited=True, now=0.0)
    assert not fan_out.waits(others_busy=True, now=1.0)
    assert fan_out.waits(others_busy=False, now=1.0)
    fan_out.first_came(3, waited=False, now=2.0)
    assert fan_out.waits(others_busy=True, now=3.0)


def test_an_empty_queue_beside_a_busy_one_is_long_polled_at_least_every_minute() -> None:
    """Short polls may miss a few messages: a long poll LONG_POLL_EVERY_SECONDS after the last one."""
    fan_out = FanOut()
    fan_out.first_came(0, waited=True, now=0.0)
    fan_out.first_came(0, waited=False, now=LONG_POLL_EVERY_SECONDS - 1)
    assert not fan_out.waits(others_busy=True, now=LONG_POLL_EVERY_SECONDS - 1)
    assert fan_out.waits(others_busy=True, now=LONG_POLL_EVERY_SECONDS)
