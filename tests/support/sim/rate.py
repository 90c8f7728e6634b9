"""A lane's start-rate bucket in the in-memory state table: the adapter's reads and conditional writes.

As `dispatcher.adapters.rate.RateBucket`: a take is a strongly consistent `Query` of the
item, then a `PutItem` on the condition that no one wrote it since (read again once
when someone did). The item lives in the in-memory AWS, so every container sees it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dispatcher.adapters.rate import TAKE_ATTEMPTS
from dispatcher.core import rate
from tests.support.sim.api import Client, Usage


@dataclass
class RateItems:
    """The state table's start-rate items: lane → its bucket (absent until a first take)."""

    usage: Usage
    buckets: dict[str, rate.BucketState] = field(default_factory=dict)


class RateView:
    """The `StartRate` port of one lane on one container's DynamoDB client."""

    def __init__(self, items: RateItems, client: Client, lane: str, starts_per_second: float) -> None:
        self._items = items
        self._client = client
        self._lane = lane
        self.rate = starts_per_second
        self._seen: rate.BucketState | None = None

    def _read(self) -> rate.BucketState | None:
        def query() -> rate.BucketState | None:
            self._items.usage.consume(f"rate#{self._lane}", "ReadRequestUnits", 1)
            return self._items.buckets.get(self._lane)

        self._seen = self._client.call(
            "Query", f"Query (start rate of lane {self._lane})", lambda: True, query
        )
        return self._seen

    def available(self, now: float) -> int:
        """Whole starts the bucket allows now."""
        return rate.available(self._read(), now, self.rate)

    def take(self, wanted: int, now: float) -> int:
        """Take tokens for up to ``wanted`` starts; how many were granted."""
        for _ in range(TAKE_ATTEMPTS):
            state = self._read()
            granted, after = rate.take(state, wanted, now, self.rate)
            if granted == 0:
                return 0

            def put(state: rate.BucketState | None = state, after: rate.BucketState = after) -> bool:
                self._items.usage.consume(f"rate#{self._lane}", "WriteRequestUnits", 1)
                if self._items.buckets.get(self._lane) != state:
                    return False  # ConditionalCheckFailed: someone took since the read
                self._items.buckets[self._lane] = after
                return True

            if self._client.call("PutItem", f"PutItem (start rate of lane {self._lane})", lambda: True, put):
                self._seen = after
                return granted
        return 0

    def next_token_in(self, now: float) -> float:
        """Seconds until one more start is allowed, as of the latest read or write (no call)."""
        return rate.next_token_in(self._seen, now, self.rate)
