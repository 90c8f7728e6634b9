"""Start-rate-capped lanes between ticks: which have jobs that wait only for tokens, and when the next is due.

A lane's bucket holds one second's worth of starts (``b = max(1, r)``): a lane whose jobs
wait for tokens and is ticked less often than its tokens come loses them to the full
bucket and runs below its rate. So the lease keeper keeps ticking for such a lane when
its next token is due (`LeaseKeeper.hand_back`), as long as the invocation has time; the
end events of other lanes are not what paces it. A lane waits for its rate when its
tokens, not its slots, held it back this tick and its queue still had jobs: its round
stopped on a spent rate, or it was offered fewer starts than its pool had free for it and
did not find its queue drained. A lane with no tokens at all is in no round, and keeps
the last tick's verdict.
"""

from __future__ import annotations

from collections.abc import Mapping

from dispatcher.core.errors import TransientError
from dispatcher.telemetry import logger
from dispatcher.tick.ports import StartRate
from dispatcher.tick.report import StopReason

ENDED_WAITS = frozenset({StopReason.DRAINED, StopReason.WAITING})
"""A lane's stops that say its queue had nothing more it could start now."""


class RateWaits:
    """The rate-capped lanes of one dispatcher, from one tick to the next."""

    def __init__(self, buckets: Mapping[str, StartRate]) -> None:
        """``buckets``: each rate-capped lane's bucket."""
        self._buckets = buckets
        self._bound: set[str] = set()
        """Lanes of this tick offered fewer starts than their pool and own MAX allowed, by their tokens."""
        self._zero: set[str] = set()
        """Of those, lanes with no token at all (in no round this tick)."""
        self.waiting: frozenset[str] = frozenset()
        """Lanes whose jobs wait only for their rate's next token, as of the latest tick."""

    def tokens(self, lane: str, now: float) -> int | None:
        """Starts the lane's rate allows now (None: no rate); a bucket that can't be read allows none."""
        bucket = self._buckets.get(lane)
        if bucket is None:
            return None
        try:
            return bucket.available(now)
        except TransientError as error:
            logger.warning("could not read a lane's start rate", extra={"lane": lane, "reason": str(error)})
            return 0

    def planned(self, bound: frozenset[str], starved: frozenset[str]) -> None:
        """The tick's plan: the lanes its tokens held below what was free, and of those, with none at all."""
        self._bound, self._zero = set(bound), set(starved)

    def book(self, stops: Mapping[str, StopReason | None]) -> None:
        """After a tick: ``stops``, each lane's that had a round, says which of them wait for tokens."""
        waiting = {
            lane
            for lane, stop in stops.items()
            if lane in self._buckets
            and (stop is StopReason.CAPACITY or (lane in self._bound and stop not in ENDED_WAITS))
        }
        waiting |= (self._zero - set(stops)) & self.waiting
        self.waiting = frozenset(waiting)
        self._bound, self._zero = set(), set()

    def due(self, now: float) -> float | None:
        """Seconds until the first waiting lane's next token (no call); None when no lane waits."""
        if not self.waiting:
            return None
        return min(self._buckets[lane].next_token_in(now) for lane in self.waiting)
