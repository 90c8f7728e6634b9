"""DynamoDB: a lane's start-rate bucket (`dispatcher.core.rate`), one item per lane.

``pk`` = ``rate#<lane>``, ``sk`` = ``bucket``; ``tokens`` and ``at`` as the last take left
them. A take reads the item (a strongly consistent ``Query`` of its key) and writes it back on the condition
that no other take wrote since (``at`` unchanged): one conditional write per round of
starts. A take that loses the race reads again once; losing twice grants nothing this
round (the rate only errs slow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dispatcher.adapters.errors import translated
from dispatcher.adapters.table import RECORD_LIFETIME_SECONDS, conditional
from dispatcher.core import rate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BUCKET_SORT_KEY = "bucket"
TAKE_ATTEMPTS = 2


class RateBucket:
    """One lane's start-rate bucket in the state table."""

    def __init__(self, client: DynamoDBClient, table: str, lane: str, starts_per_second: float) -> None:
        self._client = client
        self.table = table
        self.lane = lane
        self.rate = starts_per_second
        self._key = {"pk": {"S": f"rate#{lane}"}, "sk": {"S": BUCKET_SORT_KEY}}
        self._seen: rate.BucketState | None = None
        """The bucket as this process last read or wrote it."""

    def _read(self) -> rate.BucketState | None:
        # A strongly consistent Query of the item's own key: the role already has Query.
        with translated(f"Query on state table {self.table} (start rate of lane {self.lane})"):
            items = self._client.query(
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND sk = :sk",
                ExpressionAttributeValues={":pk": self._key["pk"], ":sk": self._key["sk"]},
                ConsistentRead=True,
            )["Items"]
        self._seen = (
            rate.BucketState(float(items[0]["tokens"]["N"]), float(items[0]["at"]["N"])) if items else None
        )
        return self._seen

    def available(self, now: float) -> int:
        """Whole starts the bucket allows now."""
        return rate.available(self._read(), now, self.rate)

    def take(self, wanted: int, now: float) -> int:
        """Take tokens for up to ``wanted`` starts; how many were granted."""
        for _ in range(TAKE_ATTEMPTS):
            state = self._read()
            granted, after = rate.take(state, wanted, now, self.rate)
            if granted == 0:
                return 0
            condition: dict[str, Any] = (
                {"ConditionExpression": "attribute_not_exists(pk)"}
                if state is None
                else {
                    "ConditionExpression": "#at = :at",
                    "ExpressionAttributeNames": {"#at": "at"},
                    "ExpressionAttributeValues": {":at": {"N": repr(state.at)}},
                }
            )
            item = {
                **self._key,
                "tokens": {"N": repr(after.tokens)},
                "at": {"N": repr(after.at)},
                "expires_at": {"N": str(int(after.at) + RECORD_LIFETIME_SECONDS)},
            }
            if conditional(
                self._client,
                self.table,
                f"start rate of lane {self.lane}",
                "put_item",
                Item=item,
                **condition,
            ):
                self._seen = after
                return granted
        return 0

    def next_token_in(self, now: float) -> float:
        """Seconds until one more start is allowed, as of this process's latest read or write (no call)."""
        return rate.next_token_in(self._seen, now, self.rate)
