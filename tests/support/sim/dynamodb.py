"""The state table in memory: recent starts and ends, the tick lease, and what each write and read costs.

Items are the adapters' own (`dispatcher.adapters.ledger`, `dispatcher.adapters.gate_roster`), so
their sizes, and the write and read units they cost, are the deployed table's. One partition key holds every
lane's starts and ends, another the lease (`tests.support.sim.lease`), each gate's admissions
another (`tests.support.sim.inside`), and each partition has DynamoDB's 1,000
write and 3,000 read units a second; a `BatchWriteItem` short of units writes what fits
and leaves the rest unprocessed, and a failed condition costs its write all the same.
A `Query` reads 1 MB a page, strongly consistent: a unit per 4 KB. Not modelled: the
table's own (account) throughput, TTL (records older than the review window are
dropped from memory; no tick reads them).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dispatcher.adapters.item_keys import sort_key
from dispatcher.adapters.job_items import kept_item, kept_key
from dispatcher.adapters.limit_items import limit_item, limit_key, read_limit
from dispatcher.adapters.member_items import members_item
from dispatcher.adapters.roster_items import inside_partition
from dispatcher.adapters.size_items import SIZES_KIND, sizes_key, sizes_pack
from dispatcher.adapters.state_items import (
    PACK_LIMIT,
    end_packs,
    ends_item,
    ledger_starts_of,
    partition,
    start_packs,
    starts_item,
    void_item,
)
from dispatcher.adapters.window_items import read_items
from dispatcher.core.adaptive import LimitState
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS, LedgerRequest, LedgerStart, StateWindow
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.core.jobs import Dropped, JobRecord
from dispatcher.core.pacing import LISTING_MAX_AGE_SECONDS
from dispatcher.core.quotas import DYNAMODB_PARTITION_READS, DYNAMODB_PARTITION_WRITES
from dispatcher.core.sizes import Reservation, SizeEntry
from tests.support.sim.api import Client, LiveBucket, Usage
from tests.support.sim.inside import InsidePartition
from tests.support.sim.items import QUERY_PAGE_BYTES, READ_UNIT_BYTES, Stored, write_units
from tests.support.sim.lease import Lease
from tests.support.sim.scheduler import Scheduler
from tests.support.sim.sized import reserved_item

if TYPE_CHECKING:
    from tests.support.sim.jobs import JobPartitions

KEEP_SECONDS = RECENT_START_WINDOW_SECONDS + LISTING_MAX_AGE_SECONDS + 60
"""How long the table keeps a record in memory: longer than any tick's review window."""


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
        self.gates: dict[str, InsidePartition] = {}
        """Gate → its partition of admissions."""

    def inside_partition(self, gate: str) -> InsidePartition:
        """The partition of the executions inside ``gate``."""
        if gate not in self.gates:
            self.gates[gate] = InsidePartition(self._scheduler, self._usage, inside_partition(self.own, gate))
        return self.gates[gate]

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

    def item(self, key: str) -> dict[str, Any] | None:
        """The item stored under ``key`` (None: none)."""
        stored = self._items.get(key)
        return None if stored is None else stored.item

    def delete(self, key: str) -> None:
        """Delete an item, if there is one."""
        if self._items.pop(key, None) is not None:
            self._keys.remove(key)

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


class LedgerView:
    """The `StartLedger` port on one container's DynamoDB client."""

    def __init__(self, table: StateTable, client: Client, jobs: JobPartitions | None = None) -> None:
        self._table = table
        self._client = client
        self._jobs = jobs
        """Where job records written with the starts go (their partition's units)."""

    def starts_of(self, requests: Sequence[LedgerRequest], now: float) -> list[list[LedgerStart]]:
        """The starts of these requests, each lane's apart (the adapter's own)."""
        return ledger_starts_of(requests, now, self._table.own)

    def _write_batch(
        self,
        items: list[dict[str, Any]],
        packs: Sequence[Sequence[Any]],
        role: str,
        kept: Sequence[dict[str, Any]] = (),
        taken: dict[str, bool] | None = None,
    ) -> int:
        """One `BatchWriteItem`: the items that fit in the partition's units now; the records left.

        ``kept``: job records in the same call, in their own partition (best effort, as the adapter's).
        """
        units = [write_units(item) for item in items]
        written = {"count": 0, "kept": 0}

        def admit() -> bool:
            granted = self._table.write(sum(units), partial=True) if units else 0
            while written["count"] < len(units) and units[written["count"]] <= granted:
                granted -= units[written["count"]]
                written["count"] += 1
            if kept and self._jobs is not None:
                written["kept"] = int(self._jobs.jobs.write(sum(write_units(item) for item in kept)) > 0)
            return written["count"] > 0 or bool(written["kept"])

        def write() -> int:
            for item in items[: written["count"]]:
                self._table.put(item["sk"]["S"], Stored(item))
            if written["kept"] and self._jobs is not None:
                for item in kept:
                    self._jobs.jobs.items[item["sk"]["S"]] = Stored(item)
                if taken is not None:
                    taken["kept"] = True
            return sum(len(pack) for pack in packs[written["count"] :])

        action = f"BatchWriteItem on state table {self._table.partition}"
        return self._client.call("BatchWriteItem", action, admit, write, role=role)

    def record_members(self, queues: Mapping[str, Mapping[str, str]]) -> None:
        """One `PutItem` of the members' queues (as the adapter)."""
        item = members_item(self._table.partition, queues)

        def admit() -> bool:
            return self._table.write(write_units(item)) > 0

        def put() -> None:
            self._table.put(item["sk"]["S"], Stored(item))

        self._client.call(
            "PutItem", f"PutItem on state table {self._table.partition}", admit, put, role="members"
        )

    def record_limit(self, pool: str, state: LimitState, previous: LimitState | None, now: float) -> bool:
        """One conditional `PutItem` of a pool's limit (as the adapter): its write unit is spent anyway."""
        item = limit_item(self._table.partition, pool, state, now)

        def admit() -> bool:
            return self._table.write(write_units(item)) > 0

        def put() -> bool:
            kept = self._table.item(limit_key(pool))
            version = None if kept is None else read_limit(kept)[1].version
            if version != (None if previous is None else previous.version):
                return False
            self._table.put(limit_key(pool), Stored(item))
            return True

        action = f"PutItem on state table {self._table.partition} (limit of pool {pool})"
        return self._client.call("PutItem", action, admit, put, role="limit")

    def record_sizes(self, pool: str, added: Mapping[str, SizeEntry], gone: Collection[str]) -> None:
        """One `BatchWriteItem` (as the adapter): the round's pack put, the ``gone`` packs deleted.

        Billed as DynamoDB bills it: each item a unit per KB (a delete: the deleted item's size).
        """
        item = sizes_pack(self._table.partition, pool, added)
        units = write_units(item) + sum(
            write_units(kept) for pack in gone if (kept := self._table.item(pack)) is not None
        )

        def admit() -> bool:
            return self._table.write(units) > 0

        def write() -> None:
            self._table.put(item["sk"]["S"], Stored(item))
            for pack in gone:
                self._table.delete(pack)

        action = f"BatchWriteItem on state table {self._table.partition} (sizes)"
        self._client.call("BatchWriteItem", action, admit, write, role="sizes")

    def record_reservation(self, pool: str, reservation: Reservation | None) -> None:
        """One `UpdateItem` of a pool's reservation (as the adapter)."""
        self._update_sizes(pool, lambda item: reserved_item(item, reservation), "reservation")

    def _update_sizes(self, pool: str, change: Callable[[dict[str, Any]], dict[str, Any]], role: str) -> None:
        key = sizes_key(pool)
        before = self._table.item(key) or {
            "pk": {"S": self._table.partition},
            "sk": {"S": key},
            "kind": {"S": SIZES_KIND},
            "pool": {"S": pool},
        }
        after = change(dict(before))

        def admit() -> bool:
            # An update is billed for the larger of the item before and after it.
            return self._table.write(max(write_units(before), write_units(after))) > 0

        def put() -> None:
            self._table.put(key, Stored(after))

        self._client.call("UpdateItem", f"UpdateItem on state table ({role})", admit, put, role=role)

    def limit(self, pool: str) -> LimitState | None:
        """One `GetItem` of a pool's limit (None: never written)."""

        def admit() -> bool:
            return self._table.read([])

        def get() -> LimitState | None:
            kept = self._table.item(limit_key(pool))
            return None if kept is None else read_limit(kept)[1]

        return self._client.call("GetItem", f"GetItem on state table {self._table.partition}", admit, get)

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

    def record(
        self, starts: Sequence[LedgerStart], kept: Sequence[JobRecord | Dropped] = ()
    ) -> list[LedgerStart | JobRecord | Dropped]:
        """Write starts (25 an item) before they happen, job records beside; those left.

        A throttled `BatchWriteItem` raises (as the adapter's first call).
        """
        packs = start_packs(starts)
        items = [starts_item(self._table.partition, pack, self._table.own) for pack in packs]
        distinct = {kept_key(record): record for record in kept}
        records = [kept_item(self._table.own, record) for record in distinct.values()]
        taken = {"kept": False}
        left = self._write_batch(items, packs, "record", records, taken) if packs else 0
        return [
            *[start for pack in packs for start in pack][len(starts) - left :],
            *([] if taken["kept"] else distinct.values()),
        ]

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

    def void(self, starts: Sequence[LedgerStart], now: float) -> int:
        """Void starts that no longer count, 500 an item; how many were left."""
        packs = chunks(starts, PACK_LIMIT)
        return self._best_effort(
            [void_item(self._table.partition, pack, now) for pack in packs], packs, "forget"
        )
