"""The state table's shared layout: how long its records live, and its conditional writes.

One DynamoDB table (``pk``, ``sk``, TTL on ``expires_at``) holds the dispatcher's memory,
each role under partition keys of its own: recent starts and ends (`StateTable`), the
executions inside each gate (`StateTable` too), the tick lease (`TickLease`) and the re-run
claims (`RerunClaims`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dispatcher.adapters.errors import translated

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

RECORD_LIFETIME_SECONDS = 24 * 3600
"""DynamoDB's TTL sweep is a backstop for records a tick never resolved; a tick only reads
records younger than the review window, so the sweep's own lag is harmless."""
START_RECORD_LIFETIME_SECONDS = 15 * 24 * 3600
"""A start record (and its message group) outlives Step Functions' 14-day redrive window."""
INSIDE_RECORD_LIFETIME_SECONDS = 366 * 24 * 3600
"""An admission into a gate is its execution's place until it leaves, and a STANDARD execution
runs for a year at most: the TTL sweep is the last backstop, past any execution's end."""
CONDITION_FAILED = "ConditionalCheckFailedException"


def query_pages(client: DynamoDBClient, table: str, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every item a `Query` of the state table returns, page after page."""
    while True:
        with translated(f"Query on state table {table}"):
            page = client.query(**request)
        yield from page.get("Items", [])
        last_key = page.get("LastEvaluatedKey")
        if not last_key:
            return
        request["ExclusiveStartKey"] = last_key


class _ConditionFailedError(Exception):
    """The write's condition did not hold."""


def conditional(client: DynamoDBClient, table: str, what: str, operation: str, **request: Any) -> bool:
    """Make a conditional call on the state table; False when its condition failed.

    ``what`` names the items in errors (e.g. "tick lease").
    """
    return conditional_answer(client, table, what, operation, **request) is not None


def conditional_answer(
    client: DynamoDBClient, table: str, what: str, operation: str, **request: Any
) -> dict[str, Any] | None:
    """`conditional`, with the call's answer (None when its condition failed)."""
    action = "".join(part.capitalize() for part in operation.split("_"))
    try:
        with translated(
            f"{action} on state table {table} ({what})", {CONDITION_FAILED: _ConditionFailedError}
        ):
            answer: dict[str, Any] = getattr(client, operation)(TableName=table, **request)
    except _ConditionFailedError:
        return None
    return answer
