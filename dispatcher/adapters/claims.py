"""DynamoDB: the re-run claims, which keep a failure from being re-run both ways."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dispatcher.adapters.errors import translated
from dispatcher.adapters.table import START_RECORD_LIFETIME_SECONDS, conditional

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class RerunClaims:
    """Which way each failure is re-run, so that a `rerun` in the other mode can't re-run it too.

    A `rerun` killed after queueing a job but before deleting its spool message leaves
    the failure spooled. Run again the same way, it queues the same job again (starting
    nothing twice); run the other way, it would queue a second re-run. So each failure
    is claimed for one mode, with a conditional ``PutItem``, before its job is queued:
    ``pk`` = ``rerun#<state machine ARN>``, ``sk`` = ``<execution name>#<redriveCount>``
    (a failure after a redrive is a new failure, free to re-run either way). A claim
    lives as long as a start record.
    """

    def __init__(self, client: DynamoDBClient, table: str, state_machine_arn: str) -> None:
        self._client = client
        self.table = table
        self._partition = f"rerun#{state_machine_arn}"

    def _key(self, name: str, redrive_count: int) -> dict[str, Any]:
        return {"pk": {"S": self._partition}, "sk": {"S": f"{name}#{redrive_count}"}}

    def claimed(self, name: str, redrive_count: int) -> str | None:
        """The mode this failure is claimed for, if any (a strongly consistent read)."""
        with translated(f"GetItem on state table {self.table} (re-run claims)"):
            item = self._client.get_item(
                TableName=self.table, Key=self._key(name, redrive_count), ConsistentRead=True
            ).get("Item")
        return None if item is None else item["mode"]["S"]

    def claim(self, name: str, redrive_count: int, mode: str, now: float) -> str | None:
        """Claim this failure for ``mode``: None when it is ours, else the mode that has it.

        Claiming again for the same mode succeeds (a rerun run again, or botocore's retry
        of a write whose answer was lost).
        """
        if conditional(
            self._client,
            self.table,
            "re-run claims",
            "put_item",
            Item={
                **self._key(name, redrive_count),
                "mode": {"S": mode},
                "claimed_at": {"N": f"{now:.6f}"},
                "expires_at": {"N": str(int(now) + START_RECORD_LIFETIME_SECONDS)},
            },
            ConditionExpression="attribute_not_exists(pk) OR #mode = :mode",
            ExpressionAttributeNames={"#mode": "mode"},
            ExpressionAttributeValues={":mode": {"S": mode}},
        ):
            return None
        other = self.claimed(name, redrive_count)
        return other if other != mode else None
