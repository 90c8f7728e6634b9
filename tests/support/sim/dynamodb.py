"""The state table in memory: recent starts and ends, the tick lease, and what each write and read costs.

Items are the adapter's own (`dispatcher.adapters.state_table`), so their sizes, and the
write and read units they cost, are the deployed table's. One partition key holds every
lane's starts and ends, another the lease, and each partition has DynamoDB's 1,000
write and 3,000 read units a second; a `BatchWriteItem` short of units writes what fits
and leaves the rest unprocessed, and a failed condition costs its write all the same.
A `Query` reads 1 MB a page, strongly consistent: a unit per 4 KB. Not modelled: the
table's own (account) throughput, TTL (records older than the review window are
dropped from memory; no tick reads them).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dispatcher.adapters.state_items import (
    PACK_LIMIT,
    end_packs,
    ends_item,
    partition,
    read_items,
    recorded_starts,
    records_of,
    sort_key,
    start_packs,
    starts_item,
    void_item,
)
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS, RecordedStart, StartsToRecord, StateWindow
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.core.pacing import LISTING_MAX_AGE_SECONDS
from dispatcher.core.quotas import DYNAMODB_PARTITION_READS, DYNAMODB_PARTITION_WRITES
from tests.support.sim.api import Client, LiveBucket, Usage
from tests.support.sim.scheduler import Scheduler

QUERY_PAGE_BYTES = 1024 * 1024
READ_UNIT_BYTES = 4096
WRITE_UNIT_BYTES = 1024
KEEP_SECONDS = RECENT_START_WINDOW_SECONDS + LISTING_MAX_AGE_SECONDS + 60
"""How long the table keeps a record in memory: longer than any tick's review window."""


def _value_bytes(kind: str, content: Any) -> int:
    """DynamoDB's size of one value.

    A number is 1 byte per 2 digits, + 1; a list or a map 3 bytes, + 1 a member and the
    members (a map's with their names); null and a boolean 1.
    """
    if kind == "S":
        return len(str(content).encode())
    if kind == "N":
        digits = len(str(content).replace("-", "").replace(".", "").strip("0")) or 1
        return math.ceil(digits / 2) + 1
    if kind == "SS":
        return sum(len(str(member).encode()) for member in content)
    if kind == "L":
        return 3 + sum(1 + _typed_bytes(member) for member in content)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + _typed_bytes(value) for name, value in content.items())
    return 1


def _typed_bytes(value: Mapping[str, Any]) -> int:
    [(kind, content)] = value.items()
    return _value_bytes(kind, content)


def item_bytes(item: Mapping[str, Mapping[str, Any]]) -> int:
    """DynamoDB's size of an item: each attribute's name and value."""
    size = 0
    for name, value in item.items():
        size += len(name.encode()) + _typed_bytes(value)
    return size


def write_units(item: Mapping[str, Mapping[str, Any]]) -> int:
    """Write request units of one item (1 KB each, rounded up)."""
    return max(1, math.ceil(item_bytes(item) / WRITE_UNIT_BYTES))


@dataclass
class Stored:
    """One item of the recent-start partition."""

    item: dict[str, Any]
    size: int = 0

    def __post_init__(self) -> None:
        self.size = item_bytes(self.item)


class StateTable:
    """The table: every lane's recent starts and ends, and the lease (keyed by the default lane's machine)."""

    def __init__(self, scheduler: Scheduler, usage: Usage, state_machine_arn: str) -> None:
        self.own = state_machine_arn
        self.partition = partition(state_machine_arn)
        self._scheduler = scheduler
        self._usage = usage
        self._items: dict[str, Stored] = {}
        self._keys: list[str] = []
        """The sort keys, in order (a Query reads them in order)."""
        self._writes = LiveBucket.of(DYNAMODB_PARTITION_WRITES, scheduler.now)
        self._reads = LiveBucket.of(DYNAMODB_PARTITION_READS, scheduler.now)
        self.lease = Lease(scheduler, usage, f"lease#{state_machine_arn}")

    def write(self, units: int, *, partial: bool = False) -> int:
        """Take write units of the partition now; how many were granted (all or none, unless ``partial``)."""
        granted = int(self._writes.take(self._scheduler.now, units, partial=partial))
        self._usage.consume(self.partition, "WriteRequestUnits", granted)
        return granted

    def put(self, key: str, stored: Stored) -> None:
        """Store an item (a new one, or one overwritten)."""
        if key not in self._items:
            bisect.insort(self._keys, key)
        self._items[key] = stored
        self._drop_old()

    def query(self, oldest: float) -> list[list[Stored]]:
        """The pages a `Query` from ``oldest`` reads (1 MB each)."""
        start = bisect.bisect_left(self._keys, sort_key(oldest, ""))
        pages: list[list[Stored]] = [[]]
        size = 0
        for key in self._keys[start:]:
            stored = self._items[key]
            item_size = stored.size
            if size + item_size > QUERY_PAGE_BYTES and pages[-1]:
                pages.append([])
                size = 0
            pages[-1].append(stored)
            size += item_size
        return pages

    def read(self, page: Sequence[Stored]) -> bool:
        """Take the read units of one page now; False (a throttle) when there aren't enough."""
        units = max(1, math.ceil(sum(stored.size for stored in page) / READ_UNIT_BYTES))
        if not self._reads.take(self._scheduler.now, units):
            return False
        self._usage.consume(self.partition, "ReadRequestUnits", units)
        return True

    def _drop_old(self) -> None:
        horizon = sort_key(self._scheduler.now - KEEP_SECONDS, "")
        if self._keys and self._keys[0] < horizon:
            cut = bisect.bisect_left(self._keys, horizon)
            for key in self._keys[:cut]:
                del self._items[key]
            del self._keys[:cut]


class StateStoreView:
    """The `StateStore` port on one container's DynamoDB client."""

    def __init__(self, table: StateTable, client: Client) -> None:
        self._table = table
        self._client = client

    def records_of(self, starts: Sequence[StartsToRecord], now: float) -> list[list[RecordedStart]]:
        """The records of these starts, each lane's apart (the adapter's own)."""
        return records_of(starts, now, self._table.own)

    def starts_at(
        self, groups: Mapping[str, str], now: float, redrives: Mapping[str, int] | None = None
    ) -> list[RecordedStart]:
        """The records of these starts of the key's state machine (the adapter's own)."""
        return recorded_starts(groups, now, redrives, self._table.own)

    def _write_batch(self, items: list[dict[str, Any]], packs: Sequence[Sequence[Any]], role: str) -> int:
        """One `BatchWriteItem`: the items that fit in the partition's units now; the records left."""
        units = [write_units(item) for item in items]
        written = {"count": 0}

        def admit() -> bool:
            granted = self._table.write(sum(units), partial=True)
            while written["count"] < len(units) and units[written["count"]] <= granted:
                granted -= units[written["count"]]
                written["count"] += 1
            return written["count"] > 0

        def write() -> int:
            for item in items[: written["count"]]:
                self._table.put(item["sk"]["S"], Stored(item))
            return sum(len(pack) for pack in packs[written["count"] :])

        action = f"BatchWriteItem on state table {self._table.partition}"
        return self._client.call("BatchWriteItem", action, admit, write, role=role)

    def _best_effort(self, items: list[dict[str, Any]], packs: Sequence[Sequence[Any]], role: str) -> int:
        """Packed items, 25 a `BatchWriteItem` (as the adapter); how many records were left."""
        left = 0
        for start in range(0, len(items), BATCH_WRITE_LIMIT):
            chunk = slice(start, start + BATCH_WRITE_LIMIT)
            try:
                left += self._write_batch(items[chunk], packs[chunk], role)
            except TransientError:
                left += sum(len(pack) for pack in packs[chunk])
        return left

    def record(self, records: Sequence[RecordedStart]) -> list[RecordedStart]:
        """Write starts before they happen, 25 an item (as the adapter); those left."""
        packs = start_packs(records)
        items = [starts_item(self._table.partition, pack, self._table.own) for pack in packs]
        left = self._write_batch(items, packs, "record")
        return [record for pack in packs for record in pack][len(records) - left :]

    def note_ended(self, ended: Sequence[EndedExecution], now: float) -> int:
        """Reported ends, once per execution with the latest stop, 500 an item (as the adapter)."""
        packs = end_packs(ended, self._table.own)
        return self._best_effort(
            [ends_item(self._table.partition, pack, now, self._table.own) for pack in packs], packs, "end"
        )

    def window(self, oldest: float) -> StateWindow:
        """`Query` of the starts and ends written since ``oldest``, page by page."""
        items: list[dict[str, Any]] = []
        for page in self._table.query(oldest):

            def admit(page: list[Stored] = page) -> bool:
                return self._table.read(page)

            self._client.call("Query", "Query on state table", admit)
            items.extend(stored.item for stored in page)
        return read_items(items, self._table.own)

    def forget(self, records: Sequence[RecordedStart], now: float) -> int:
        """Void records that no longer count, 500 an item; how many were left (as the adapter)."""
        packs = chunks(records, PACK_LIMIT)
        return self._best_effort(
            [void_item(self._table.partition, pack, now) for pack in packs], packs, "forget"
        )


@dataclass
class LeaseItem:
    """The lease as its one item holds it."""

    owner: str
    held_until: float
    again: bool = False


class Lease:
    """The tick lease's item, on a partition of its own (1 write unit a call, whatever the condition says)."""

    def __init__(self, scheduler: Scheduler, usage: Usage, partition_key: str) -> None:
        self._scheduler = scheduler
        self._usage = usage
        self.partition = partition_key
        self._writes = LiveBucket.of(DYNAMODB_PARTITION_WRITES, scheduler.now)
        self.item: LeaseItem | None = None

    def admit(self) -> bool:
        """One write unit of the lease's partition now."""
        if not self._writes.take(self._scheduler.now):
            return False
        self._usage.consume(self.partition, "WriteRequestUnits", 1)
        return True


class LeaseView:
    """The `Lease` port on one container's DynamoDB client: the adapter's conditions, in memory."""

    def __init__(self, lease: Lease, client: Client) -> None:
        self._lease = lease
        self._client = client

    def _call(self, operation: str, effect: Callable[[], bool], role: str | None = None) -> bool:
        action = f"{operation} on state table (tick lease)"
        return self._client.call(operation, action, self._lease.admit, effect, role=role)

    def acquire(self, owner: str, now: float, held_until: float) -> bool:
        """Conditional `PutItem`: free, expired, or already ours."""

        def put() -> bool:
            item = self._lease.item
            if item is not None and item.held_until >= now and item.owner != owner:
                return False
            self._lease.item = LeaseItem(owner, held_until)
            return True

        return self._call("PutItem", put, role="lease")

    def ask_again(self, owner: str, now: float) -> bool:
        """Conditional `UpdateItem`: a live holder other than us is asked for one more tick."""

        def update() -> bool:
            item = self._lease.item
            if item is None or item.held_until < now or item.owner == owner:
                return False
            item.again = True
            return True

        return self._call("UpdateItem", update)

    def take_ask(self, owner: str) -> bool:
        """Conditional `UpdateItem`: ours, and another tick was asked for; the request taken."""

        def take() -> bool:
            item = self._lease.item
            if item is None or item.owner != owner or not item.again:
                return False
            item.again = False
            return True

        return self._call("UpdateItem", take)

    def release(self, owner: str) -> bool:
        """Conditional `DeleteItem` unless another tick was asked for; then `UpdateItem` takes the request."""

        def delete() -> bool:
            item = self._lease.item
            if item is not None and item.owner == owner and not item.again:
                self._lease.item = None
                return True
            return False

        def take_request() -> bool:
            item = self._lease.item
            if item is None or item.owner != owner:
                return False
            item.again = False
            return True

        return self._call("DeleteItem", delete) or not self._call("UpdateItem", take_request)

    def let_go(self, owner: str) -> None:
        """Conditional `DeleteItem`: ours, whatever was asked."""

        def delete() -> bool:
            if self._lease.item is not None and self._lease.item.owner == owner:
                self._lease.item = None
                return True
            return False

        self._call("DeleteItem", delete)
