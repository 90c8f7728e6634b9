"""DynamoDB: the state table's start ledger — recent starts and ends, every state machine's of one dispatcher.

``ListExecutions`` may omit an execution for up to a minute after it started, so a
start is written here *before* ``StartExecution`` and, whenever the list doesn't show
it, counts as running until ``DescribeExecution`` says it ended or the record is 90 s
old. The list also keeps showing an execution for a while after it ended, so the end a
status change event reports is written here too, and every tick of the next 90 s
leaves that execution out.

How its items are packed and keyed: `dispatcher.adapters.state_items`. Who holds a member's
places (a gate's admissions, a tenant lane's starts) is its roster's: `dispatcher.adapters.gate_roster`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from dispatcher.adapters.errors import translated
from dispatcher.adapters.item_keys import sort_key
from dispatcher.adapters.job_items import kept_item, kept_key
from dispatcher.adapters.limit_items import limit_item, limit_key, read_limit, write_condition
from dispatcher.adapters.member_items import MEMBERS_KEY, members_item, read_members
from dispatcher.adapters.server_time import server_time
from dispatcher.adapters.size_items import (
    SIZES_PREFIX,
    read_reservation,
    read_sizes,
    reservation_update,
    sizes_key,
    sizes_pack,
)
from dispatcher.adapters.state_items import (
    PACK_LIMIT,
    end_packs,
    ends_item,
    item_origins,
    ledger_starts_of,
    partition,
    start_packs,
    starts_item,
    void_item,
)
from dispatcher.adapters.table import conditional, query_pages
from dispatcher.adapters.window_items import read_items
from dispatcher.core.adaptive import LimitState
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.counting import LedgerRequest, LedgerStart, StateWindow
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.core.jobs import Dropped, JobRecord
from dispatcher.core.rerun import Origin
from dispatcher.core.sizes import Reservation, SizeEntry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef

GROUP_LOOKUP_MARGIN_SECONDS = 300.0
"""A start is recorded just before `StartExecution`; this much clock skew and delay is allowed."""


def _spans(moments: Sequence[float], margin: float) -> list[tuple[float, float]]:
    """Sorted moments merged into spans wherever two are within twice ``margin`` of each other."""
    spans: list[tuple[float, float]] = []
    for moment in moments:
        if spans and moment - spans[-1][1] <= 2 * margin:
            spans[-1] = (spans[-1][0], moment)
        else:
            spans.append((moment, moment))
    return spans


class StartLedgerTable:
    """The recent starts and ends of one dispatcher's state machines, in the state table."""

    def __init__(self, client: DynamoDBClient, table: str, state_machine_arn: str) -> None:
        """``state_machine_arn``: the default lane's, which keys the partition."""
        self._client = client
        self.table = table
        self._own = state_machine_arn
        self._partition = partition(state_machine_arn)

    def starts_of(self, requests: Sequence[LedgerRequest], now: float) -> list[list[LedgerStart]]:
        """The starts `record` writes for starting these executions now, each lane's apart.

        Their keys are known before writing; they share one write id.
        """
        return ledger_starts_of(requests, now, self._own)

    def _write(self, items: Sequence[dict[str, Any]]) -> set[str]:
        """One `BatchWriteItem` of packed items; the sort keys of those left unprocessed."""
        requests: list[WriteRequestTypeDef] = [{"PutRequest": {"Item": item}} for item in items]
        with translated(f"BatchWriteItem on state table {self.table}"):
            response = self._client.batch_write_item(RequestItems={self.table: requests})
        return {
            str(request["PutRequest"]["Item"]["sk"]["S"])
            for request in response.get("UnprocessedItems", {}).get(self.table, [])
            if "PutRequest" in request
        }

    def record(
        self, starts: Sequence[LedgerStart], kept: Sequence[JobRecord | Dropped] = ()
    ) -> list[LedgerStart | JobRecord | Dropped]:
        """Write starts (of one `starts_of`) before they happen; those left unprocessed.

        Starts recorded together share an item, 25 an item, whatever their state machine,
        in `BatchWriteItem` calls of 25 items. An unprocessed start must not happen in this
        round. The first call still failing after botocore's retries raises (its starts may
        or may not have been written); a later one leaves its starts unprocessed. ``kept``:
        job records (`dispatcher.adapters.job_items`) in the same calls after the starts;
        those left unprocessed are returned too.
        """
        packs = start_packs(starts)
        items = [starts_item(self._partition, pack, self._own) for pack in packs]
        distinct = {kept_key(record): record for record in kept}  # a job's latest: one item per key
        unprocessed: set[str] = set()
        for index, chunk in enumerate(
            chunks(
                [*items, *(kept_item(self._own, record) for record in distinct.values())], BATCH_WRITE_LIMIT
            )
        ):
            try:
                unprocessed |= self._write(chunk)
            except TransientError:
                if index == 0:
                    raise
                unprocessed |= {item["sk"]["S"] for item in chunk}
        return [
            *(start for pack in packs if pack[0].sort_key in unprocessed for start in pack),
            *(record for key, record in distinct.items() if key in unprocessed),
        ]

    def note_ended(self, ended: Sequence[EndedExecution], now: float) -> int:
        """Remember for the review window the ends status change events reported; how many were left.

        An execution reported more than once is written once, with its latest stop; up to
        500 ends an item, whatever their state machine (an end that names none is the key's
        machine's), in one `BatchWriteItem`. Best effort: an end left unwritten only means
        that later ticks count the execution until the list stops showing it, which is safe.
        """
        packs = end_packs(ended, self._own)
        return self._write_packs(
            packs, [ends_item(self._partition, pack, now, self._own) for pack in packs], TransientError
        )

    def _write_packs(
        self,
        packs: Sequence[Sequence[object]],
        items: Sequence[dict[str, Any]],
        tolerated: type[Exception] | tuple[type[Exception], ...],
    ) -> int:
        """Write packed items, 25 a `BatchWriteItem`, best effort; how many records were left."""
        left = 0
        for chunk in chunks(list(zip(packs, items, strict=True)), BATCH_WRITE_LIMIT):
            try:
                unprocessed = self._write([item for _, item in chunk])
            except tolerated:
                left += sum(len(pack) for pack, _ in chunk)
                continue
            left += sum(len(pack) for pack, item in chunk if item["sk"]["S"] in unprocessed)
        return left

    def window(self, oldest: float) -> StateWindow:
        """Starts and ends written at or after ``oldest``, each naming its machine (read consistently)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk >= :oldest",
            "ExpressionAttributeValues": {
                ":pk": {"S": self._partition},
                ":oldest": {"S": sort_key(oldest, "")},
            },
            "ConsistentRead": True,
        }
        return read_items(self._query(request), self._own)

    def record_sizes(self, pool: str, added: Mapping[str, SizeEntry], gone: Collection[str]) -> None:
        """Keep ``pool``'s sized executions: a pack of these (before they start); delete packs all ended.

        One `BatchWriteItem` (`dispatcher.adapters.size_items`): the new pack, and the ``gone``
        packs (at most 24). A failure, or the new pack left unprocessed, raises
        `TransientError`; a delete left unprocessed is made by a later write.
        """
        requests: list[WriteRequestTypeDef] = [
            {"PutRequest": {"Item": sizes_pack(self._partition, pool, added)}}
        ]
        for pack in gone:
            requests.append({"DeleteRequest": {"Key": {"pk": {"S": self._partition}, "sk": {"S": pack}}}})
        with translated(f"BatchWriteItem on state table {self.table} (sizes)"):
            response = self._client.batch_write_item(RequestItems={self.table: requests})
        left = response.get("UnprocessedItems", {}).get(self.table, [])
        if any("PutRequest" in request for request in left):
            raise TransientError(f"the state table left the sizes of pool {pool}'s sized jobs unprocessed")

    def record_reservation(self, pool: str, reservation: Reservation | None) -> None:
        """Set ``pool``'s reservation (None: remove it), one `UpdateItem`; raise `TransientError`."""
        key = {"pk": {"S": self._partition}, "sk": {"S": sizes_key(pool)}}
        with translated(f"UpdateItem on state table {self.table} (reservation)"):
            self._client.update_item(TableName=self.table, **reservation_update(key, pool, reservation))

    def sizes(self) -> dict[str, dict[str, SizeEntry]]:
        """Each pool's sized executions as kept (one Query of their items, read consistently)."""
        return self.slot_items()[0]

    def slot_items(self) -> tuple[dict[str, dict[str, SizeEntry]], dict[str, Reservation]]:
        """Each pool's sized executions and its reservation (one Query of their items, read consistently)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": self._partition}, ":prefix": {"S": SIZES_PREFIX}},
            "ConsistentRead": True,
        }
        sizes: dict[str, dict[str, SizeEntry]] = {}
        reservations: dict[str, Reservation] = {}
        for item in self._query(request):
            pool, entries = read_sizes(item)
            sizes.setdefault(pool, {}).update(entries)
            reservation = read_reservation(item)
            if reservation is not None:
                reservations[pool] = reservation
        return sizes, reservations

    def record_members(self, queues: Mapping[str, Mapping[str, str]]) -> None:
        """Keep the members' queues in the one item of the partition that holds them."""
        with translated(f"PutItem on state table {self.table} (members)"):
            self._client.put_item(TableName=self.table, Item=members_item(self._partition, queues))

    def record_limit(self, pool: str, state: LimitState, previous: LimitState | None, now: float) -> bool:
        """Write ``pool``'s limit, made from ``previous``; False when another writer changed it since."""
        return conditional(
            self._client,
            self.table,
            f"limit of pool {pool}",
            "put_item",
            Item=limit_item(self._partition, pool, state, now),
            **write_condition(previous),
        )

    def limit(self, pool: str) -> LimitState | None:
        """``pool``'s limit as last written (None: never written: L starts at its ``initial``)."""
        return self.limit_read(pool)[0]

    def limit_read(self, pool: str) -> tuple[LimitState | None, float | None]:
        """`limit`, and the time by the table's clock when it was read (None: the response didn't say).

        The CLI changes a limit at that time, not its own machine's: the ends a limit counts
        carry Step Functions' clock, and AWS's servers keep one time where a laptop may not.
        """
        key = {"pk": {"S": self._partition}, "sk": {"S": limit_key(pool)}}
        with translated(f"GetItem on state table {self.table} (limit of pool {pool})"):
            response = self._client.get_item(TableName=self.table, Key=key, ConsistentRead=True)
        item = response.get("Item")
        return (None if item is None else read_limit(item)[1]), server_time(response)

    def members(self) -> dict[str, dict[str, str]]:
        """The members' queues as kept ({} before a tick kept any): what `status` and `forget` read."""
        key = {"pk": {"S": self._partition}, "sk": {"S": MEMBERS_KEY}}
        with translated(f"GetItem on state table {self.table} (members)"):
            item = self._client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        return {} if item is None else read_members(item)

    def groups(self, started: Mapping[str, float], state_machine_arn: str = "") -> dict[str, str]:
        """The message groups recorded for one state machine's executions (`origins`, their groups)."""
        return {
            name: origin.group
            for name, origin in self.origins(started, state_machine_arn).items()
            if origin.group is not None
        }

    def origins(self, started: Mapping[str, float], state_machine_arn: str = "") -> dict[str, Origin]:
        """The message group and lane recorded for one state machine's executions (name → start date).

        ``state_machine_arn``: empty for the key's.

        Reads the records written near each start date, merged into as few queries as
        the dates allow. A name with no record left (15 days, or started elsewhere) is
        missing from the answer.
        """
        found: dict[str, Origin] = {}
        for low, high in _spans(sorted(started.values()), GROUP_LOOKUP_MARGIN_SECONDS):
            request: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
                "ExpressionAttributeValues": {
                    ":pk": {"S": self._partition},
                    ":low": {"S": sort_key(max(0.0, low - GROUP_LOOKUP_MARGIN_SECONDS), "")},
                    ":high": {"S": sort_key(high + GROUP_LOOKUP_MARGIN_SECONDS, "~")},
                },
                "ProjectionExpression": (
                    "#names, #groups, #name, #group, #machines, #machine_of, #lane, #lanes, #lane_of, #slots"
                ),
                "ExpressionAttributeNames": {
                    f"#{attribute}": attribute
                    for attribute in (
                        "names",
                        "groups",
                        "name",
                        "group",
                        "machines",
                        "machine_of",
                        "lane",
                        "lanes",
                        "lane_of",
                        "slots",
                    )
                },
            }
            for item in self._query(request):
                for name, origin in item_origins(item, state_machine_arn or self._own, self._own).items():
                    if name in started:
                        found.setdefault(name, origin)
        return found

    def _query(self, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every item a Query returns, page after page."""
        return query_pages(self._client, self.table, request)

    def void(self, starts: Sequence[LedgerStart], now: float) -> int:
        """Void starts that no longer count (ended, superseded, never started); how many were left.

        One item names up to 500 of them; the starts themselves (and their groups) stay.
        Best effort: a start left behind is reviewed again next tick and found resolved
        again (or holds its slot for at most the window), so a failure here costs calls or
        a little capacity, never the cap.
        """
        packs = chunks(starts, PACK_LIMIT)
        items = [void_item(self._partition, pack, now) for pack in packs]
        return self._write_packs(packs, items, (TransientError, ClientError))
