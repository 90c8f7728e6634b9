"""AWS's batch limits, and how the tick cuts its work to fit them."""

from __future__ import annotations

from collections.abc import Sequence
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
