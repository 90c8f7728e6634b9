"""A lane's start rate: a token bucket of ``r`` starts a second and a burst of ``b = max(1, r)``.

The bucket lives in the state table, so it holds across ticks, looping keepers,
overlapping invocations and cold starts: a tick takes the tokens for one round of starts
in one conditional write, then makes at most that many starts. Over any interval of t
seconds a lane makes at most ``b + r·t`` starts. Tokens taken for a start that did not
happen (a throttle, a crash) are not given back: the rate only errs slow. Pure: time
arrives as ``now``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def burst(rate: float) -> float:
    """The most starts at once: one second's worth, and never less than one."""
    return max(1.0, rate)


@dataclass(frozen=True)
class BucketState:
    """What the state table holds: tokens left after the last take, and when it was."""

    tokens: float
    at: float


def refilled(state: BucketState | None, now: float, rate: float) -> BucketState:
    """The bucket at ``now``: full when it was never used; a clock behind ``at`` adds nothing."""
    if state is None:
        return BucketState(burst(rate), now)
    elapsed = max(0.0, now - state.at)
    return BucketState(min(burst(rate), state.tokens + elapsed * rate), max(now, state.at))


def available(state: BucketState | None, now: float, rate: float) -> int:
    """Whole starts the bucket allows at ``now``."""
    return math.floor(refilled(state, now, rate).tokens + 1e-9)


def take(state: BucketState | None, wanted: int, now: float, rate: float) -> tuple[int, BucketState]:
    """Starts granted of ``wanted`` at ``now``, and the bucket to write back."""
    full = refilled(state, now, rate)
    granted = max(0, min(wanted, available(state, now, rate)))
    return granted, BucketState(max(0.0, full.tokens - granted), full.at)


def next_token_in(state: BucketState | None, now: float, rate: float) -> float:
    """Seconds from ``now`` until the bucket allows one more whole start (0: one is there now)."""
    tokens = refilled(state, now, rate).tokens
    if tokens >= 1 - 1e-9:
        return 0.0
    return (1 - tokens) / rate
