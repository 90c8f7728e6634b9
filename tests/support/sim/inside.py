"""A gate's partition of the state table in memory: an item per execution inside, and confirmations.

The adapter's own items (`dispatcher.adapters.state_items`), on a partition of each gate's
own with DynamoDB's 1,000 write and 3,000 read units a second; a `Query` reads the whole
partition. Deletions are timed, for the benchmark's leak figures.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from dispatcher.adapters.gate_items import confirmation_item, inside_item, read_inside
from dispatcher.adapters.item_keys import INSIDE_KIND
from dispatcher.adapters.lane_roster_items import (
    HEAD_KEY,
    gone_item,
    gone_key,
    head_item,
    pack_item,
    packs_of,
    read_packed,
)
from dispatcher.adapters.roster_items import held_item
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.errors import TransientError
from dispatcher.core.gates import confirmed
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.lane_rosters import KeptRoster
from dispatcher.core.quotas import DYNAMODB_PARTITION_READS, DYNAMODB_PARTITION_WRITES
from dispatcher.core.rosters import RosterEntry, RosterRead
from dispatcher.core.tenants import Hold, held_key
from dispatcher.core.topology import Member
from tests.support.sim.api import Client, LiveBucket, Usage
from tests.support.sim.items import READ_UNIT_BYTES, Stored, write_units
from tests.support.sim.scheduler import Scheduler


class InsidePartition:
    """One gate's partition: an item per execution inside (by name), and its confirmations."""

    def __init__(self, scheduler: Scheduler, usage: Usage, key: str) -> None:
        self.key = key
        self._scheduler = scheduler
        self._usage = usage
        self.items: dict[str, Stored] = {}
        """Sort key → the item."""
        self._writes = LiveBucket.of(DYNAMODB_PARTITION_WRITES, scheduler.now)
        self._reads = LiveBucket.of(DYNAMODB_PARTITION_READS, scheduler.now)
        self.deleted: dict[str, float] = {}
        """Execution name → when its admission's item was last deleted (a release, an end, a check)."""

    def write(self, units: int, *, partial: bool = False) -> int:
        """Take write units now; how many were granted (all or none, unless ``partial``)."""
        granted = int(self._writes.take(self._scheduler.now, units, partial=partial))
        self._usage.consume(self.key, "WriteRequestUnits", granted)
        return granted

    def read(self) -> bool:
        """Take the read units of a Query of the whole partition now; False (a throttle) when short."""
        size = sum(stored.size for stored in self.items.values())
        units = max(1, math.ceil(size / READ_UNIT_BYTES))
        if not self._reads.take(self._scheduler.now, units):
            return False
        self._usage.consume(self.key, "ReadRequestUnits", units)
        return True

    def read_units(self, units: int) -> bool:
        """Take read units now (a `GetItem`); False (a throttle) when short."""
        if not self._reads.take(self._scheduler.now, units):
            return False
        self._usage.consume(self.key, "ReadRequestUnits", units)
        return True

    def delete(self, key: str) -> bool:
        """Delete an item; whether there was one."""
        stored = self.items.pop(key, None)
        if stored is not None and stored.item.get("kind", {}).get("S") == INSIDE_KIND:
            self.deleted[key] = self._scheduler.now
        return stored is not None


class RosterView:
    """The `Roster` port on one container's DynamoDB client (as the adapter): each member's partition."""

    def __init__(self, own: str, partition: Callable[[str], InsidePartition], client: Client) -> None:
        """``own``: the table's key (the default lane's machine); ``partition``: a gate's."""
        self._own = own
        self._partition = partition
        self._client = client

    def enter(self, entries: Sequence[RosterEntry]) -> list[RosterEntry]:
        """Entries' items, 25 a `BatchWriteItem`; those left (a throttle of the first call raises)."""
        unprocessed: list[RosterEntry] = []
        for index, chunk in enumerate(chunks(entries, BATCH_WRITE_LIMIT)):
            try:
                unprocessed += self._write(chunk)
            except TransientError:
                if index == 0:
                    raise
                unprocessed += chunk
        return unprocessed

    def _write(self, records: Sequence[RosterEntry]) -> list[RosterEntry]:
        """One `BatchWriteItem` (each item in its member's partition); those left."""
        written: list[RosterEntry] = []

        def admit() -> bool:
            for record in records:
                item = inside_item(self._own, record)
                if self._partition(record.member).write(write_units(item)):
                    written.append(record)
            return bool(written)

        def write() -> list[RosterEntry]:
            for record in written:
                item = inside_item(self._own, record)
                self._partition(record.member).items[record.name] = Stored(item)
            return [record for record in records if record not in written]

        return self._client.call(
            "BatchWriteItem", "BatchWriteItem on state table", admit, write, role="record"
        )

    def read(self, member: Member) -> RosterRead:
        """`Query` of the member's partition (its entries, confirmations and holds)."""
        partition = self._partition(member.name)
        items = self._client.call(
            "Query",
            "Query on state table",
            partition.read,
            lambda: [stored.item for stored in partition.items.values()],
        )
        records, confirmations, holds = read_inside(items, member)
        return RosterRead(*confirmed(records, confirmations), held=tuple(holds))

    def hold(self, member: Member, holds: Sequence[Hold]) -> None:
        """`BatchWriteItem` of held jobs (one call: a round holds at most a few); raises when throttled."""
        partition = self._partition(member.name)
        items = [held_item(self._own, member.name, hold) for hold in holds]

        def put() -> None:
            for item in items:
                partition.items[item["sk"]["S"]] = Stored(item)

        self._client.call(
            "BatchWriteItem",
            "BatchWriteItem on state table",
            lambda: partition.write(sum(write_units(item) for item in items)) > 0,
            put,
            role="record",
        )

    def confirm(self, gate: Gate, names: Sequence[str], now: float) -> None:
        """`PutItem` of one confirmation."""
        partition = self._partition(gate.name)
        item = confirmation_item(self._own, gate.name, names, now)

        def put() -> None:
            partition.items[item["sk"]["S"]] = Stored(item)

        self._client.call(
            "PutItem",
            "PutItem on state table",
            lambda: partition.write(write_units(item)) > 0,
            put,
            role="confirm",
        )

    def tidy(self, member: Member, keys: Sequence[str]) -> int:
        """Delete stale confirmations and shown holds, 25 a `BatchWriteItem`; how many were left."""
        partition = self._partition(member.name)
        left = 0
        for chunk in chunks(keys, BATCH_WRITE_LIMIT):
            try:
                self._client.call(
                    "BatchWriteItem",
                    "BatchWriteItem on state table",
                    lambda chunk=chunk: partition.write(len(chunk)) > 0,
                    lambda chunk=chunk: [partition.delete(key) for key in chunk],
                    role="forget",
                )
            except TransientError:
                left += len(chunk)
        return left

    def release(self, gate: Gate, name: str, sent_at: float) -> bool:
        """Conditional `DeleteItem`: the admission goes if recorded strictly before ``sent_at`` (a unit)."""
        partition = self._partition(gate.name)

        def delete() -> bool:
            stored = partition.items.get(name)
            if stored is None or float(stored.item["recorded_at"]["N"]) >= sent_at:
                return False
            return partition.delete(name)

        return self._client.call(
            "DeleteItem", "DeleteItem on state table", lambda: partition.write(1) > 0, delete, role="release"
        )

    def leave(self, entries: Sequence[RosterEntry]) -> int:
        """Delete entries' items, 25 a `BatchWriteItem`; how many were left."""
        left = 0
        for chunk in chunks(entries, BATCH_WRITE_LIMIT):

            def admit(chunk: Sequence[RosterEntry] = chunk) -> bool:
                return all(self._partition(record.member).write(1) for record in chunk)

            def delete(chunk: Sequence[RosterEntry] = chunk) -> None:
                for record in chunk:
                    self._partition(record.member).delete(record.name)

            try:
                self._client.call(
                    "BatchWriteItem", "BatchWriteItem on state table", admit, delete, role="forget"
                )
            except TransientError:
                left += len(chunk)
        return left


class LaneRosterView:
    """The `Roster` port of tenant lanes on one container's DynamoDB client (as `LaneRosterTable`).

    Packed entries, gone items and a head, in each lane's partition; kept in ``kept`` (the
    container's warm state) and read back when the head's version changed.
    """

    def __init__(
        self,
        own: str,
        partition: Callable[[str], InsidePartition],
        client: Client,
        kept: dict[str, KeptRoster] | None = None,
    ) -> None:
        self._own = own
        self._partition = partition
        self._client = client
        self._kept: dict[str, KeptRoster] = {} if kept is None else kept

    def _put(self, member: str, items: Sequence[dict[str, Any]], deletes: Sequence[str], role: str) -> None:
        """One `BatchWriteItem` of puts and deletes in the member's partition (all or, throttled, none)."""
        partition = self._partition(member)

        def effect() -> None:
            for item in items:
                partition.items[item["sk"]["S"]] = Stored(item)
            for key in deletes:
                partition.delete(key)

        units = sum(write_units(item) for item in items) + len(deletes)
        self._client.call(
            "BatchWriteItem",
            "BatchWriteItem on state table",
            lambda: partition.write(units) > 0,
            effect,
            role=role,
        )

    def read(self, member: Member) -> RosterRead:
        """As kept when the head's version (a `GetItem`) is the kept one; else a `Query`, and a new head."""
        kept = self._kept.get(member.name) or KeptRoster("")
        if not kept.version or self._version(member.name) != kept.version:
            kept = self._load(member.name, member.state_machine_arn)
        return RosterRead(list(kept.entries.values()), [], held=tuple(kept.holds.values()))

    def _version(self, member: str) -> str | None:
        partition = self._partition(member)

        def effect() -> str | None:
            stored = partition.items.get(HEAD_KEY)
            return None if stored is None else str(stored.item["version"]["S"])

        return self._client.call("GetItem", "GetItem on state table", lambda: partition.read_units(1), effect)

    def _load(self, member: str, state_machine_arn: str) -> KeptRoster:
        self._kept.pop(member, None)
        partition = self._partition(member)
        items = self._client.call(
            "Query",
            "Query on state table",
            partition.read,
            lambda: [stored.item for stored in partition.items.values()],
        )
        entries, gone, holds, _ = read_packed(items, member, state_machine_arn)
        version = uuid.uuid4().hex
        head = head_item(self._own, member, version)

        def put() -> None:
            partition.items[HEAD_KEY] = Stored(head)

        self._client.call(
            "PutItem",
            "PutItem on state table",
            lambda: partition.write(write_units(head)) > 0,
            put,
            role="head",
        )
        kept = KeptRoster.read(version, entries, gone, holds)
        self._kept[member] = kept
        return kept

    def enter(self, entries: Sequence[RosterEntry]) -> list[RosterEntry]:
        """Packs of entries, 25 a `BatchWriteItem`; a throttle of the first call raises (as the adapter)."""
        unprocessed: list[RosterEntry] = []
        members = list({entry.member for entry in entries})
        for index, chunk in enumerate(chunks(packs_of(entries), BATCH_WRITE_LIMIT)):
            items = [pack_item(self._own, pack) for pack in chunk]
            try:
                for member in {pack[0].member for pack in chunk}:
                    mine = [item for item, pack in zip(items, chunk, strict=True) if pack[0].member == member]
                    self._put(member, mine, (), "record")
            except TransientError:
                for member in members:
                    self._kept.pop(member, None)
                if index == 0:
                    raise
                unprocessed += [entry for pack in chunk for entry in pack]
        if not unprocessed:
            for entry in entries:
                kept = self._kept.get(entry.member)
                if kept is not None:
                    kept.enter([entry])
        return unprocessed

    def leave(self, entries: Sequence[RosterEntry]) -> int:
        """One gone item a lane, and the deletes of what it outlived; how many were left."""
        left = 0
        by_member: dict[str, list[RosterEntry]] = {}
        for entry in entries:
            by_member.setdefault(entry.member, []).append(entry)
        for member, leaving in by_member.items():
            try:
                kept = self._kept.get(member) or self._load(member, leaving[0].state_machine_arn)
                key = gone_key()
                plan = kept.leave(leaving, key)
                now = max(entry.recorded_at for entry in leaving)
                gone = [gone_item(self._own, member, key, plan.gone, now)] if plan.gone else []
                for start in range(0, len(gone) + len(plan.delete), BATCH_WRITE_LIMIT):
                    items = gone[start : start + BATCH_WRITE_LIMIT]
                    deletes = plan.delete[max(0, start - len(gone)) : start - len(gone) + BATCH_WRITE_LIMIT]
                    self._put(member, items, deletes, "forget")
                kept.left(leaving, key, plan)
            except TransientError:
                self._kept.pop(member, None)
                left += len(leaving)
        return left

    def hold(self, member: Member, holds: Sequence[Hold]) -> None:
        """`BatchWriteItem` of held jobs; raises when throttled."""
        try:
            self._put(member.name, [held_item(self._own, member.name, hold) for hold in holds], (), "record")
        except TransientError:
            self._kept.pop(member.name, None)
            raise
        kept = self._kept.get(member.name)
        if kept is not None:
            kept.holds.update({hold.group: hold for hold in holds})

    def tidy(self, member: Member, keys: Sequence[str]) -> int:
        """Delete shown holds' items; how many were left."""
        try:
            self._put(member.name, [], keys, "forget")
        except TransientError:
            self._kept.pop(member.name, None)
            return len(keys)
        kept = self._kept.get(member.name)
        if kept is not None:
            tidied = set(keys)
            kept.holds = {group: hold for group, hold in kept.holds.items() if held_key(group) not in tidied}
        return 0
