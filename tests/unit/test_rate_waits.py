"""Which rate-capped lanes wait only for tokens after a tick, and when the next one is due."""

from __future__ import annotations

from dataclasses import dataclass

from dispatcher.core import rate
from dispatcher.core.errors import TransientError
from dispatcher.core.planning import bound_by_rate
from dispatcher.tick.rates import RateWaits
from dispatcher.tick.report import StopReason


@dataclass
class Bucket:
    """A lane's bucket as the tick sees it through its port, held in memory (no AWS here)."""

    state: rate.BucketState | None
    per_second: float = 2.0
    failing: bool = False

    def available(self, now: float) -> int:
        """Whole starts now."""
        if self.failing:
            raise TransientError("throttled")
        return rate.available(self.state, now, self.per_second)

    def take(self, wanted: int, now: float) -> int:
        """Take up to ``wanted``."""
        granted, self.state = rate.take(self.state, wanted, now, self.per_second)
        return granted

    def next_token_in(self, now: float) -> float:
        """Seconds to the next token."""
        return rate.next_token_in(self.state, now, self.per_second)


def claims(waits: RateWaits, *claimed: tuple[str, int | None, int]) -> None:
    """One tick's claims (lane, tokens, room), as the tick plans them (`bound_by_rate`)."""
    held = {lane: bound_by_rate(tokens, room) for lane, tokens, room in claimed}
    waits.planned(
        frozenset(lane for lane, (bound, _) in held.items() if bound),
        frozenset(lane for lane, (_, none) in held.items() if none),
    )


def test_a_lane_its_tokens_held_below_its_room_waits_unless_its_queue_ran_dry() -> None:
    """Offered fewer than its room by its tokens: it waits if it started all, not if it drained."""
    waits = RateWaits({"a": Bucket(None), "b": Bucket(None)})
    claims(waits, ("a", 2, 10), ("b", 2, 10))
    waits.book({"a": None, "b": StopReason.DRAINED})
    assert waits.waiting == {"a"}


def test_a_lane_whose_round_found_its_rate_spent_waits() -> None:
    """Another invocation took the tokens between the claim and the take: the round stops on capacity."""
    waits = RateWaits({"a": Bucket(None)})
    claims(waits, ("a", 5, 5))
    waits.book({"a": StopReason.CAPACITY})
    assert waits.waiting == {"a"}


def test_slots_not_tokens_holding_a_lane_back_is_no_wait_for_the_rate() -> None:
    """Tokens enough for every slot: the lane waits for slots (ends bring ticks), not for its rate."""
    waits = RateWaits({"a": Bucket(None)})
    claims(waits, ("a", 2, 2), ("unrated", None, 0))
    waits.book({"a": None})
    assert waits.waiting == frozenset()


def test_a_lane_with_no_token_keeps_its_verdict_until_it_has_a_round() -> None:
    """No token, so no round: it still waits if it waited; a lane never seen waiting does not start to."""
    waits = RateWaits({"a": Bucket(None), "b": Bucket(None)})
    claims(waits, ("a", 1, 10))
    waits.book({"a": None})
    claims(waits, ("a", 0, 10), ("b", 0, 10))
    waits.book({})
    assert waits.waiting == {"a"}
    claims(waits, ("a", 1, 10))
    waits.book({"a": StopReason.DRAINED})
    assert waits.waiting == frozenset()


def test_the_next_token_due_is_the_soonest_of_the_waiting_lanes() -> None:
    """Two waiting lanes: the one whose bucket refills first sets when to tick again."""
    waits = RateWaits(
        {"slow": Bucket(rate.BucketState(0.0, 100.0), 0.5), "fast": Bucket(rate.BucketState(0.0, 100.0), 4.0)}
    )
    assert waits.due(100.0) is None, "no lane waits yet"
    claims(waits, ("slow", 0, 3), ("fast", 0, 3))
    waits.book({"slow": StopReason.CAPACITY, "fast": StopReason.CAPACITY})
    assert waits.due(100.0) == 0.25


def test_a_bucket_that_cannot_be_read_allows_no_start() -> None:
    """A throttled read of the bucket grants nothing this tick (the rate errs slow); no bucket: no limit."""
    waits = RateWaits({"a": Bucket(None, failing=True)})
    assert waits.tokens("a", 100.0) == 0
    assert waits.tokens("unrated", 100.0) is None
