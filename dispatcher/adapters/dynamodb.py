"""DynamoDB: the state table, where the dispatcher remembers its recent starts.

``ListExecutions`` may omit an execution for up to a minute after it started, so a
start is written here *before* ``StartExecution`` and, whenever the list doesn't show
it, counts as running until ``DescribeExecution`` says it ended or the record is 90 s
old. Keys: ``pk`` = ``recent-start#<state machine ARN>``, ``sk`` =
``<recorded_at, fixed width>#<execution name>`` so a tick reads only the recent ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.aws_errors import translate
from dispatcher.errors import ConfigurationError
from dispatcher.models import RecordedStart

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# DynamoDB's TTL sweep is a backstop for records a tick never resolved; a tick only
# reads records younger than the review window, so the sweep's own lag is harmless.
RECORD_LIFETIME_SECONDS = 24 * 3600
BATCH_WRITE_LIMIT = 25


def sort_key(recorded_at: float, name: str) -> str:
    """Sort key that orders records by time as strings (fixed width until year 2286)."""
    return f"{recorded_at:017.6f}#{name}"


class RecentStarts:
    """The recent starts of one state machine, in the state table."""

    def __init__(self, client: DynamoDBClient, table: str, state_machine_arn: str) -> None:
        self._client = client
        self.table = table
        self._partition = f"recent-start#{state_machine_arn}"

    def record(self, name: str, now: float) -> RecordedStart:
        """Write the start of ``name`` before it happens, so it counts from now on."""
        now = float(f"{now:.6f}")  # what DynamoDB stores, so the record reads back equal
        key = sort_key(now, name)
        try:
            self._client.put_item(
                TableName=self.table,
                Item={
                    "pk": {"S": self._partition},
                    "sk": {"S": key},
                    "name": {"S": name},
                    "recorded_at": {"N": f"{now:.6f}"},
                    "expires_at": {"N": str(int(now) + RECORD_LIFETIME_SECONDS)},
                },
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, f"PutItem on state table {self.table}") from error
        return RecordedStart(name=name, recorded_at=now, sort_key=key)

    def since(self, oldest: float) -> list[RecordedStart]:
        """Records written at or after ``oldest``, read strongly consistently."""
        records: list[RecordedStart] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk >= :oldest",
            "ExpressionAttributeValues": {
                ":pk": {"S": self._partition},
                ":oldest": {"S": sort_key(oldest, "")},
            },
            "ConsistentRead": True,
        }
        while True:
            try:
                page = self._client.query(**request)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, f"Query on state table {self.table}") from error
            records.extend(
                RecordedStart(
                    name=item["name"]["S"],
                    recorded_at=float(item["recorded_at"]["N"]),
                    sort_key=item["sk"]["S"],
                )
                for item in page.get("Items", [])
            )
            last_key = page.get("LastEvaluatedKey")
            if not last_key:
                return records
            request["ExclusiveStartKey"] = last_key

    def forget(self, records: Sequence[RecordedStart]) -> int:
        """Delete records that no longer count (ended, or superseded); return how many were left.

        Best effort: a record left behind is reviewed again next tick and found
        resolved again, so a failure here costs calls, never capacity.
        """
        left = 0
        for start in range(0, len(records), BATCH_WRITE_LIMIT):
            chunk = records[start : start + BATCH_WRITE_LIMIT]
            try:
                response = self._client.batch_write_item(
                    RequestItems={
                        self.table: [
                            {
                                "DeleteRequest": {
                                    "Key": {
                                        "pk": {"S": self._partition},
                                        "sk": {"S": record.sort_key},
                                    }
                                }
                            }
                            for record in chunk
                        ]
                    }
                )
            except (ClientError, BotoCoreError) as error:
                translated = translate(error, f"BatchWriteItem on state table {self.table}")
                if isinstance(translated, ConfigurationError):
                    raise translated from error
                left += len(chunk)
                continue
            left += len(response.get("UnprocessedItems", {}).get(self.table, []))
        return left
