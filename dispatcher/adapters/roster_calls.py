"""DynamoDB: the calls every member's roster makes on the state table, whatever its kind.

A gate's roster (`dispatcher.adapters.gate_roster`) and a tenant lane's
(`dispatcher.adapters.lane_roster`) each keep a partition of their own: both write and tidy
their items, and note held jobs, with these calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from dispatcher.adapters.errors import translated
from dispatcher.adapters.roster_items import held_item, inside_partition
from dispatcher.adapters.table import query_pages
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.errors import TransientError
from dispatcher.core.tenants import Hold
from dispatcher.core.topology import Member

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef


class RosterCalls:
    """The calls every member's roster makes on the state table (keyed by the default lane's machine)."""

    def __init__(self, client: DynamoDBClient, table: str, state_machine_arn: str) -> None:
        """``state_machine_arn``: the default lane's, which keys every member's partition."""
        self._client = client
        self.table = table
        self._own = state_machine_arn

    def _batch(self, requests: list[WriteRequestTypeDef]) -> list[Any]:
        """One `BatchWriteItem`; the requests left unprocessed."""
        with translated(f"BatchWriteItem on state table {self.table}"):
            response = self._client.batch_write_item(RequestItems={self.table: requests})
        return list(response.get("UnprocessedItems", {}).get(self.table, []))

    def _query(self, member: str) -> Iterator[dict[str, Any]]:
        """Every item of the member's partition, read consistently, page after page."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": inside_partition(self._own, member)}},
            "ConsistentRead": True,
        }
        return query_pages(self._client, self.table, request)

    def _hold(self, member: Member, holds: Sequence[Hold]) -> None:
        """Note held jobs in ``member``'s roster, 25 a `BatchWriteItem`; raises unless each is written."""
        for chunk in chunks(holds, BATCH_WRITE_LIMIT):
            requests: list[WriteRequestTypeDef] = [
                {"PutRequest": {"Item": held_item(self._own, member.name, hold)}} for hold in chunk
            ]
            if self._batch(requests):
                raise TransientError(f"the state table left held jobs of {member.name} unprocessed")

    def _tidy(self, member: Member, keys: Sequence[str]) -> int:
        """Delete items of ``member``'s roster by key; how many were left (one left goes on a later tick)."""
        left = 0
        partition = inside_partition(self._own, member.name)
        for chunk in chunks(keys, BATCH_WRITE_LIMIT):
            requests: list[WriteRequestTypeDef] = [
                {"DeleteRequest": {"Key": {"pk": {"S": partition}, "sk": {"S": key}}}} for key in chunk
            ]
            try:
                left += len(self._batch(requests))
            except (TransientError, ClientError):
                left += len(chunk)
        return left
