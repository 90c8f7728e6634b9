"""A lane's start rate: at most b + r·t starts in any t seconds, b = max(1, r), whatever the calls."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from dispatcher.core.rate import BucketState, available, burst, next_token_in, refilled, take


def test_the_burst_is_one_seconds_worth_and_at_least_one() -> None:
    """The burst is one second's worth, and at least one."""
    assert burst(2.0) == 2.0
    assert burst(0.1) == 1.0


def test_a_new_bucket_is_full_and_refills_at_the_rate() -> None:
    """A new bucket is full, and refills at the rate."""
    granted, state = take(None, 5, 100.0, 2.0)
    assert (granted, state) == (2, BucketState(0.0, 100.0))
    assert available(state, 100.4, 2.0) == 0
    assert available(state, 100.5, 2.0) == 1
    assert available(state, 160.0, 2.0) == 2, "never more than the burst"
    granted, state = take(state, 1, 100.5, 2.0)
    assert granted == 1
    assert math.isclose(state.tokens, 0.0, abs_tol=1e-9)


def test_a_clock_behind_the_last_take_adds_nothing() -> None:
    """A clock behind the last take adds nothing."""
    state = BucketState(0.5, 100.0)
    assert refilled(state, 90.0, 1.0) == BucketState(0.5, 100.0)
    assert take(state, 1, 90.0, 1.0)[0] == 0


def test_a_slow_rate_grants_one_start_then_one_every_period() -> None:
    """A slow rate grants one start, then one every period."""
    granted, state = take(None, 3, 0.0, 0.2)
    assert granted == 1
    assert take(state, 1, 4.9, 0.2)[0] == 0
    assert take(state, 1, 5.0, 0.2)[0] == 1


@given(
    rate=st.sampled_from([0.2, 1.0, 2.0, 7.5, 50.0]),
    calls=st.lists(
        st.tuples(st.floats(min_value=0.0, max_value=3.0), st.integers(min_value=0, max_value=60)),
        max_size=60,
    ),
)
def test_no_window_ever_holds_more_than_the_burst_and_the_rate(
    rate: float, calls: list[tuple[float, int]]
) -> None:
    """Whatever the gaps and the sizes asked, any window [s, e] holds at most b + r·(e - s) starts."""
    now, state = 1000.0, None
    starts: list[tuple[float, int]] = []
    for gap, wanted in calls:
        now += gap
        granted, state = take(state, wanted, now, rate)
        assert 0 <= granted <= wanted
        starts.append((now, granted))
    for first, (begin, _) in enumerate(starts):
        total = 0
        for end, granted in starts[first:]:
            total += granted
            assert total <= burst(rate) + rate * (end - begin) + 1e-6


def test_the_next_token_is_due_when_the_bucket_refills_one_whole_start() -> None:
    """Empty at 2 a second: the next start in 0.5 s; half full: in 0.25 s; a token there: now."""
    assert next_token_in(BucketState(0.0, 100.0), 100.0, 2.0) == 0.5
    assert next_token_in(BucketState(0.5, 100.0), 100.0, 2.0) == 0.25
    assert next_token_in(BucketState(0.0, 100.0), 100.6, 2.0) == 0.0
    assert next_token_in(None, 100.0, 0.1) == 0.0, "a bucket never used is full"
    assert math.isclose(next_token_in(BucketState(0.0, 100.0), 104.0, 0.1), 6.0)
