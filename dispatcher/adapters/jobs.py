"""DynamoDB: the jobs that never started — pending cancellations and job records (`job_items` keys them).

The tick reads the pending cancellations with its window (`dispatcher.adapters.ledger`) and
writes what it dropped, expired or dead-lettered here in `BatchWriteItem` calls;
`dispatcher cancel` and the producer client write cancellations and read records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from dispatcher.adapters.errors import error_code, translated
from dispatcher.adapters.job_items import (
    CANCEL_KIND,
    GROUP_KIND,
    NAME_KIND,
    cancels_partition,
    dropped_key,
    dropped_of,
    expires,
    jobs_partition,
    kept_item,
    kept_key,
    pending_group_item,
    pending_key,
    pending_name_item,
    pending_names_key,
    read_pending,
    record_item,
    record_key,
    record_of,
)
from dispatcher.adapters.table import conditional
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.errors import TransientError
from dispatcher.core.jobs import Dropped, GroupCancellation, JobRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef


class JobTable:
    """One dispatcher's pending cancellations and job records, in the state table."""

    def __init__(self, client: DynamoDBClient, table: str, key: str) -> None:
        """``key``: the default lane's state machine ARN (as the ledger's)."""
        self._client = client
        self.table = table
        self._key = key

    def write(self, records: Sequence[JobRecord | Dropped]) -> int:
        """Keep what the tick dropped, expired or dead-lettered: `BatchWriteItem` calls of 25, best effort.

        How many records were left unwritten (`dispatcher job` then says less of them).
        """
        # One item per key (`BatchWriteItem` refuses two on one key): a job's latest record.
        items = list({kept_key(record): kept_item(self._key, record) for record in records}.values())
        left = 0
        for chunk in chunks(items, BATCH_WRITE_LIMIT):
            requests: list[WriteRequestTypeDef] = [{"PutRequest": {"Item": item}} for item in chunk]
            try:
                with translated(f"BatchWriteItem on state table {self.table}"):
                    response = self._client.batch_write_item(RequestItems={self.table: requests})
            except TransientError:
                left += len(chunk)
                continue
            left += len(response.get("UnprocessedItems", {}).get(self.table, []))
        return left

    def cancel(self, record: JobRecord) -> None:
        """Cancel a job by name: its record first (what `job` reports), then its name in its hour's item.

        One `UpdateItem` on the condition that the hour's item exists, else one `PutItem` that
        makes it (a writer that made it meanwhile: the update again). An hour's item that is
        full (DynamoDB's 400 KB) leaves the name an item of its own.
        """
        with translated(f"PutItem on state table {self.table}"):
            self._client.put_item(TableName=self.table, Item=record_item(self._key, record))
        try:
            if self._pend(record):
                return
        except ClientError as error:
            if error_code(error) != "ValidationException":  # not: the hour's item is full
                raise
        with translated(f"PutItem on state table {self.table}"):
            self._client.put_item(
                TableName=self.table, Item=pending_name_item(self._key, record.lane, record.name, record.at)
            )

    def _pend(self, record: JobRecord) -> bool:
        """Add the name to its hour's item (made when there is none); whether that was done."""
        key = self._names_key(record.lane, record.name, record.at)
        at = {"N": repr(record.at)}
        for _ in range(2):
            if conditional(
                self._client,
                self.table,
                "job cancellation",
                "update_item",
                Key=key,
                UpdateExpression="SET #names.#name = :at, expires_at = :expires",
                ConditionExpression="attribute_exists(#names)",
                ExpressionAttributeNames={"#names": "names", "#name": record.name},
                ExpressionAttributeValues={":at": at, ":expires": expires(record.at)},
            ):
                return True
            made = {**key, "kind": {"S": CANCEL_KIND}, "names": {"M": {record.name: at}}}
            if conditional(
                self._client,
                self.table,
                "job cancellation",
                "put_item",
                Item={**made, "expires_at": expires(record.at)},
                ConditionExpression="attribute_not_exists(sk)",
            ):
                return True
        return False

    def _names_key(self, lane: str, name: str, at: float) -> dict[str, Any]:
        return {"pk": {"S": cancels_partition(self._key)}, "sk": {"S": pending_names_key(lane, name, at)}}

    def cancel_group(self, lane: str, group: GroupCancellation) -> None:
        """Cancel a message group's jobs sent at or before ``group.before``."""
        with translated(f"PutItem on state table {self.table}"):
            self._client.put_item(TableName=self.table, Item=pending_group_item(self._key, lane, group))

    def withdraw(self, lane: str, name: str, at: float) -> None:
        """Take back a cancellation (made at ``at``) that came too late: the job had started."""
        conditional(
            self._client,
            self.table,
            "job cancellation",
            "update_item",
            Key=self._names_key(lane, name, at),
            UpdateExpression="REMOVE #names.#name",
            ConditionExpression="attribute_exists(#names)",
            ExpressionAttributeNames={"#names": "names", "#name": name},
        )
        with translated(f"DeleteItem on state table {self.table}"):
            self._client.delete_item(
                TableName=self.table,
                Key={
                    "pk": {"S": cancels_partition(self._key)},
                    "sk": {"S": pending_key(lane, NAME_KIND, name)},
                },
            )
            self._client.delete_item(
                TableName=self.table,
                Key={"pk": {"S": jobs_partition(self._key)}, "sk": {"S": record_key(lane, name)}},
            )

    def record(self, lane: str, name: str) -> JobRecord | None:
        """The job's record (cancelled, expired, dead-lettered), read consistently; None: none."""
        item = self._job_item(record_key(lane, name))
        return None if item is None else record_of(item)

    def dropped(self, lane: str, name: str) -> Dropped | None:
        """When a tick dropped the job for its name's cancellation, and when it was sent (None: none did)."""
        item = self._job_item(dropped_key(lane, name))
        return None if item is None else dropped_of(item)

    def _job_item(self, sort_key: str) -> dict[str, Any] | None:
        """One item of the job records' partition, read consistently."""
        with translated(f"GetItem on state table {self.table}"):
            response = self._client.get_item(
                TableName=self.table,
                Key={"pk": {"S": jobs_partition(self._key)}, "sk": {"S": sort_key}},
                ConsistentRead=True,
            )
        return response.get("Item")

    def group_cancellation(self, lane: str, group: str) -> GroupCancellation | None:
        """A message group's pending cancellation, if it has one."""
        with translated(f"GetItem on state table {self.table}"):
            response = self._client.get_item(
                TableName=self.table,
                Key={
                    "pk": {"S": cancels_partition(self._key)},
                    "sk": {"S": pending_key(lane, GROUP_KIND, group)},
                },
                ConsistentRead=True,
            )
        item = response.get("Item")
        return None if item is None else read_pending([item])[lane].groups[group]
