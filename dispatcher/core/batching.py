"""AWS's batch limits, and how the tick cuts its work to fit them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

SQS_BATCH_LIMIT = 10
"""SQS hands out at most 10 messages per `ReceiveMessage`, and takes at most 10 entries per batch call."""
BATCH_WRITE_LIMIT = 25
"""DynamoDB's `BatchWriteItem` takes at most 25 items."""
ROUND_SIZE = 100
"""One admission round receives up to this many messages, records their starts in
`BatchWriteItem` calls of 25 and starts them concurrently across message groups."""

Item = TypeVar("Item")


def chunks(items: Sequence[Item], size: int) -> list[Sequence[Item]]:
    """``items`` in consecutive slices of at most ``size`` (AWS's batch limits)."""
    return [items[start : start + size] for start in range(0, len(items), size)]


def receive_size(free: int) -> int:
    """How many messages one `ReceiveMessage` asks for (SQS returns 10 at most)."""
    return max(0, min(SQS_BATCH_LIMIT, free))


def round_size(free: int) -> int:
    """How many messages one admission round receives."""
    return max(0, min(ROUND_SIZE, free))


PROBE_EVERY = 8
"""With no receive in parallel (the queue hands out one group at a time), every this many
full rounds one receive tries again, so groups that arrive later are found."""
LONG_POLL_EVERY_SECONDS = 60.0
"""A queue found empty is long-polled at least this often, even in rounds it would hold up."""


@dataclass
class FanOut:
    """How many receives follow a full first one at once: what the queue was last seen to hand out.

    FIFO never hands one group to two receives, so with a single group (or one group at a
    time, each in a block) the receives in parallel come back empty. The width follows
    the last fan-out: as many as came back with messages; doubled when all did; and when
    none did, one probe every `PROBE_EVERY` rounds. It starts at the most a round takes.
    """

    width: int = ROUND_SIZE // SQS_BATCH_LIMIT - 1
    rounds_without: int = 0
    empty: bool = False
    """Its last first receive came back empty."""
    long_polled_at: float = -math.inf
    """When a first receive last waited for messages (a long poll)."""

    def waits(self, others_busy: bool, now: float) -> bool:
        """Whether the round's first receive long-polls.

        A long poll of an empty queue takes the whole wait, and a round's members receive
        together: one that was empty last time, in a round with a member that was not,
        asks without waiting (it may miss messages that a long poll would find: it is
        asked again next round, and long-polled at least every `LONG_POLL_EVERY_SECONDS`).
        """
        return not (self.empty and others_busy) or now - self.long_polled_at >= LONG_POLL_EVERY_SECONDS

    def first_came(self, count: int, *, waited: bool, now: float) -> None:
        """What the round's first receive returned (``waited``: it long-polled)."""
        self.empty = count == 0
        if waited:
            self.long_polled_at = now

    def receives(self, batches: int) -> int:
        """How many of the ``batches`` left in the round to receive at once, now."""
        if self.width > 0:
            return min(batches, self.width)
        self.rounds_without += 1
        return min(batches, 1) if self.rounds_without % PROBE_EVERY == 0 else 0

    def learn(self, asked: int, with_messages: int) -> None:
        """What the last receives in parallel returned: ``with_messages`` of ``asked`` were not empty."""
        if asked == 0:
            return
        if with_messages == asked:
            self.width = min(ROUND_SIZE // SQS_BATCH_LIMIT - 1, max(1, 2 * self.width))
        else:
            self.width = with_messages
        if self.width > 0:
            self.rounds_without = 0
