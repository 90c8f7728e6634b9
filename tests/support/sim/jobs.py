"""The state table's pending cancellations and job records, in memory (the adapter's items and costs).

As `dispatcher.adapters.job_items` keys them: the pending cancellations in the start
ledger's partition (each tick's read of the window brings them) and the job records in a
partition of their own. A producer's cancellation is written here directly
(`JobPartitions.cancel`), as `dispatcher cancel`'s `PutItem` would; its race with a tick is
the moto tests' and the fault harness's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dispatcher.adapters.job_items import (
    CANCEL_KIND,
    cancels_partition,
    expires,
    jobs_partition,
    kept_item,
    kept_key,
    pending_group_item,
    pending_names_key,
    record_item,
)
from dispatcher.core.batching import BATCH_WRITE_LIMIT
from dispatcher.core.errors import TransientError
from dispatcher.core.jobs import Dropped, GroupCancellation, JobRecord, JobState
from tests.support.sim.api import Client, Usage
from tests.support.sim.dynamodb import StateTable
from tests.support.sim.inside import InsidePartition
from tests.support.sim.items import Stored, write_units
from tests.support.sim.scheduler import Scheduler

Items = list[dict[str, Any]]


class JobPartitions:
    """One dispatcher's two partitions of jobs that never started."""

    def __init__(self, scheduler: Scheduler, usage: Usage, table: StateTable) -> None:
        self.key = table.own
        self.table = table
        """The start ledger's partition, where pending cancellations live."""
        self.jobs = InsidePartition(scheduler, usage, jobs_partition(table.own))
        self._scheduler = scheduler

    def cancel(self, lane: str, name: str) -> None:
        """A producer cancels job ``name`` (its record, then its name in its hour's item; no units taken)."""
        now = self._scheduler.now
        record = JobRecord(lane, name, JobState.CANCELLED, "cancelled by its producer", now)
        item = record_item(self.key, record)
        self.jobs.items[item["sk"]["S"]] = Stored(item)
        sort_key = pending_names_key(lane, name, now)
        kept = self.table.item(sort_key)
        names = {**({} if kept is None else kept["names"]["M"]), name: {"N": repr(now)}}
        pending = {
            "pk": {"S": cancels_partition(self.key)},
            "sk": {"S": sort_key},
            "kind": {"S": CANCEL_KIND},
            "names": {"M": names},
            "expires_at": expires(now),
        }
        self.table.put(sort_key, Stored(pending))

    def cancel_group(self, lane: str, group: str) -> None:
        """A producer cancels group ``group``'s jobs sent until now."""
        cancellation = GroupCancellation(group, self._scheduler.now, "tenant left")
        item = pending_group_item(self.key, lane, cancellation)
        self.table.put(item["sk"]["S"], Stored(item))


class JobRecordsView:
    """The `JobRecords` port on one container's DynamoDB client."""

    def __init__(self, partitions: JobPartitions, client: Client) -> None:
        self._partitions = partitions
        self._client = client

    def write(self, records: Sequence[JobRecord | Dropped]) -> int:
        """One `BatchWriteItem` per 25 records, best effort (as the adapter's); how many were left."""
        partitions = self._partitions
        distinct = list({kept_key(record): record for record in records}.values())
        left = 0
        for start in range(0, len(distinct), BATCH_WRITE_LIMIT):
            items: Items = [kept_item(partitions.key, record) for record in distinct[start : start + 25]]

            def admit(items: Items = items) -> bool:
                return bool(partitions.jobs.write(sum(write_units(item) for item in items)))

            def write(items: Items = items) -> None:
                for item in items:
                    partitions.jobs.items[item["sk"]["S"]] = Stored(item)

            try:
                action = "BatchWriteItem on state table"
                self._client.call("BatchWriteItem", action, admit, write, role="jobs")
            except TransientError:  # best effort, as the adapter's
                left += len(items)
        return left
