"""DynamoDB: the state table's recent starts and ends, the dispatcher's memory for counting.

``ListExecutions`` may omit an execution for up to a minute after it started, so a
start is written here *before* ``StartExecution`` and, whenever the list doesn't show
it, counts as running until ``DescribeExecution`` says it ended or the record is 90 s
old. The list also keeps showing an execution for a while after it ended, so the end a
status change event reports is written here too, and every tick of the next 90 s
leaves that execution out.

Writes are packed, because DynamoDB bills a write unit per kilobyte *per item*: one
item holds a batch of starts recorded together (up to 25), one the ends an invocation
learned, one the starts that stopped counting (a *void*, naming their sort keys). A
start costs about a tenth of a write unit instead of one.

Keys: ``pk`` = ``recent-start#<state machine ARN>``; a start's key is ``<written at,
fixed width>#<name>#<write id>`` (the write id is unique to one `record`, so a void
never applies to a later start of the same name at the same clock reading); ``sk``:
a batch of starts takes its first start's key, ends and voids
``<written at>#ends#<first name>`` and ``<written at>#void#<first name>`` (an
execution name can't contain ``#``), so one query reads the whole window. A void is
written after the starts it names, so it is in every window they are in.

A batch of starts also keeps each job's message group, for 15 days (Step Functions'
redrive window is 14): ``dispatcher rerun --restart`` finds it near the execution's
start date; a void doesn't touch it. The table's items of one record each (an older
release's: a start, a start marked ``resolved``, an ``ended``) are still read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from dispatcher.adapters.errors import translated
from dispatcher.adapters.table import RECORD_LIFETIME_SECONDS, START_RECORD_LIFETIME_SECONDS
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.counting import RecordedStart, StateWindow, latest_ends
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef

GROUP_LOOKUP_MARGIN_SECONDS = 300.0
"""A start is recorded just before `StartExecution`; this much clock skew and delay is allowed."""
ENDED_KIND = "ended"
"""An older release's item of one end."""
STARTS_KIND, ENDS_KIND, VOID_KIND = "starts", "ends", "void"
PACK_LIMIT = 500
"""Records an item of ends or a void holds at most (≈ 40 KB: far below DynamoDB's 400 KB)."""


def sort_key(written_at: float, name: str) -> str:
    """Sort key that orders records by time as strings (fixed width until year 2286)."""
    return f"{written_at:017.6f}#{name}"


def _optional_int(text: str | None) -> int | None:
    return None if text is None else int(text)


def _spans(moments: Sequence[float], margin: float) -> list[tuple[float, float]]:
    """Sorted moments merged into spans wherever two are within twice ``margin`` of each other."""
    spans: list[tuple[float, float]] = []
    for moment in moments:
        if spans and moment - spans[-1][1] <= 2 * margin:
            spans[-1] = (spans[-1][0], moment)
        else:
            spans.append((moment, moment))
    return spans


def _stored_time(moment: float) -> float:
    return float(f"{moment:.6f}")  # what DynamoDB stores, so a record reads back equal


def partition(state_machine_arn: str) -> str:
    """The partition key of one state machine's recent starts and ends."""
    return f"recent-start#{state_machine_arn}"


def recorded_starts(
    groups: Mapping[str, str], now: float, redrives: Mapping[str, int] | None = None
) -> list[RecordedStart]:
    """The records of starting these executions (name → message group) now, keys known before writing.

    ``redrives``: name → redriveCount before, for the executions redriven rather than started.
    """
    now = _stored_time(now)
    redrives = redrives or {}
    # Unique to this write: a void names exactly the records it voids, never a later
    # record of the same name at the same clock reading (a clock that stood still, or
    # stepped back), which would then not count.
    write = uuid.uuid4().hex[:12]
    return [
        RecordedStart(
            name=name,
            recorded_at=now,
            sort_key=f"{sort_key(now, name)}#{write}",
            group=group,
            redrive_count=redrives.get(name),
        )
        for name, group in groups.items()
    ]


def _number(value: float) -> dict[str, str]:
    return {"N": f"{value:.6f}"}


def starts_item(partition_key: str, records: Sequence[RecordedStart]) -> dict[str, Any]:
    """Starts recorded together (one moment, distinct names), as one item of the table."""
    first = records[0]
    item: dict[str, Any] = {
        "pk": {"S": partition_key},
        "sk": {"S": first.sort_key},
        "kind": {"S": STARTS_KIND},
        "recorded_at": _number(first.recorded_at),
        "expires_at": {"N": str(int(first.recorded_at) + START_RECORD_LIFETIME_SECONDS)},
        "names": {"L": [{"S": record.name} for record in records]},
        "write": {"S": first.sort_key.rsplit("#", 1)[1]},
        "groups": {
            "L": [{"NULL": True} if record.group is None else {"S": record.group} for record in records]
        },
    }
    redrives = {record.name: record.redrive_count for record in records if record.redrive_count is not None}
    if redrives:
        item["redrive_counts"] = {"M": {name: {"N": str(count)} for name, count in redrives.items()}}
    return item


def ends_item(partition_key: str, ended: Sequence[EndedExecution], now: float) -> dict[str, Any]:
    """Ends status change events reported (distinct names), as one item of the table."""
    now = _stored_time(now)
    return {
        "pk": {"S": partition_key},
        "sk": {"S": sort_key(now, f"{ENDS_KIND}#{ended[0].name}")},
        "kind": {"S": ENDS_KIND},
        "recorded_at": _number(now),
        "expires_at": {"N": str(int(now) + RECORD_LIFETIME_SECONDS)},
        "names": {"L": [{"S": end.name} for end in ended]},
        "stopped_at": {"L": [_number(end.stopped_at) for end in ended]},
    }


def void_item(partition_key: str, records: Sequence[RecordedStart], now: float) -> dict[str, Any]:
    """The starts that stopped counting (ended, superseded, never started), as one item of the table."""
    now = _stored_time(max(now, *(record.recorded_at for record in records)))
    return {
        "pk": {"S": partition_key},
        "sk": {"S": sort_key(now, f"{VOID_KIND}#{records[0].name}")},
        "kind": {"S": VOID_KIND},
        "recorded_at": _number(now),
        "expires_at": {"N": str(int(now) + RECORD_LIFETIME_SECONDS)},
        "keys": {"SS": sorted({record.sort_key for record in records})},
    }


def _packed_starts(item: Mapping[str, Any]) -> list[RecordedStart]:
    recorded_at = float(item["recorded_at"]["N"])
    redrives = item.get("redrive_counts", {}).get("M", {})
    write = item.get("write", {}).get("S")
    suffix = "" if write is None else f"#{write}"
    records = []
    for name_value, group_value in zip(item["names"]["L"], item["groups"]["L"], strict=True):
        name = name_value["S"]
        records.append(
            RecordedStart(
                name=name,
                recorded_at=recorded_at,
                sort_key=sort_key(recorded_at, name) + suffix,
                group=group_value.get("S"),
                redrive_count=_optional_int(redrives.get(name, {}).get("N")),
            )
        )
    return records


def _single_start(item: Mapping[str, Any]) -> RecordedStart:
    """An older release's item of one start."""
    return RecordedStart(
        name=item["name"]["S"],
        recorded_at=float(item["recorded_at"]["N"]),
        sort_key=item["sk"]["S"],
        group=item.get("group", {}).get("S"),
        redrive_count=_optional_int(item.get("redrive_count", {}).get("N")),
    )


def read_items(items: Iterable[Mapping[str, Any]]) -> StateWindow:
    """The window a run of the table's items holds: starts left out where a void names them."""
    starts: list[RecordedStart] = []
    ended: list[EndedExecution] = []
    void: set[str] = set()
    for item in items:
        kind = item.get("kind", {}).get("S")
        if kind == STARTS_KIND:
            starts.extend(_packed_starts(item))
        elif kind == ENDS_KIND:
            ended.extend(
                EndedExecution(name=name["S"], stopped_at=float(stop["N"]))
                for name, stop in zip(item["names"]["L"], item["stopped_at"]["L"], strict=True)
            )
        elif kind == VOID_KIND:
            void.update(item["keys"]["SS"])
        elif kind == ENDED_KIND:
            ended.append(EndedExecution(name=item["name"]["S"], stopped_at=float(item["stopped_at"]["N"])))
        elif "resolved" in item:
            void.add(item["sk"]["S"])
        elif "name" in item:
            starts.append(_single_start(item))
    return StateWindow(
        starts=tuple(record for record in starts if record.sort_key not in void),
        ended=tuple(ended),
        void=frozenset(void),
    )


def item_groups(item: Mapping[str, Any]) -> dict[str, str]:
    """Name → message group of the starts an item holds (a batch, or an older release's one start)."""
    if "names" in item and "groups" in item:
        return {
            name["S"]: group["S"]
            for name, group in zip(item["names"]["L"], item["groups"]["L"], strict=True)
            if "S" in group
        }
    name, group = item.get("name", {}).get("S"), item.get("group", {}).get("S")
    return {name: group} if name is not None and group is not None else {}


def start_packs(records: Sequence[RecordedStart]) -> list[list[RecordedStart]]:
    """Records in the items that hold them: one per moment recorded, in order."""
    packs: dict[float, list[RecordedStart]] = {}
    for record in records:
        packs.setdefault(record.recorded_at, []).append(record)
    return list(packs.values())


class StateTable:
    """The recent starts and ends of one state machine, in the state table."""

    def __init__(self, client: DynamoDBClient, table: str, state_machine_arn: str) -> None:
        self._client = client
        self.table = table
        self._partition = partition(state_machine_arn)

    def starts_at(
        self, groups: Mapping[str, str], now: float, redrives: Mapping[str, int] | None = None
    ) -> list[RecordedStart]:
        """The records `record` writes for starting these executions (name → message group) now.

        ``redrives``: name → redriveCount before, for the executions redriven rather
        than started. The records' keys are known before writing.
        """
        return recorded_starts(groups, now, redrives)

    def _write(self, items: Sequence[dict[str, Any]]) -> set[str]:
        """One `BatchWriteItem` of packed items; the sort keys of those left unprocessed."""
        requests: list[WriteRequestTypeDef] = [{"PutRequest": {"Item": item}} for item in items]
        with translated(f"BatchWriteItem on state table {self.table}"):
            response = self._client.batch_write_item(RequestItems={self.table: requests})
        return {
            request["PutRequest"]["Item"]["sk"]["S"]
            for request in response.get("UnprocessedItems", {}).get(self.table, [])
            if "PutRequest" in request
        }

    def record(self, records: Sequence[RecordedStart]) -> list[RecordedStart]:
        """Write starts (at most 25, distinct names) before they happen; return those left unprocessed.

        Starts recorded at one moment share an item. An unprocessed start must not happen
        in this round. A call still failing after botocore's retries raises (its records
        may or may not have been written).
        """
        packs = start_packs(records)
        unprocessed = self._write([starts_item(self._partition, pack) for pack in packs])
        return [record for pack in packs if pack[0].sort_key in unprocessed for record in pack]

    def note_ended(self, ended: Sequence[EndedExecution], now: float) -> int:
        """Remember for the review window the ends status change events reported; how many were left.

        A name reported more than once is written once, with its latest stop; up to 500
        ends an item, in one `BatchWriteItem`. Best effort: an end left unwritten only
        means that later ticks count the execution until the list stops showing it,
        which is safe.
        """
        latest = [EndedExecution(name=name, stopped_at=at) for name, at in latest_ends(ended).items()]
        packs = chunks(latest, PACK_LIMIT)
        return self._write_packs(
            packs, [ends_item(self._partition, pack, now) for pack in packs], TransientError
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
        """Starts and ends written at or after ``oldest``, read strongly consistently."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk >= :oldest",
            "ExpressionAttributeValues": {
                ":pk": {"S": self._partition},
                ":oldest": {"S": sort_key(oldest, "")},
            },
            "ConsistentRead": True,
        }
        return read_items(self._query(request))

    def groups(self, started: Mapping[str, float]) -> dict[str, str]:
        """The message groups recorded for executions (name → start date, epoch seconds).

        Reads the records written near each start date, merged into as few queries as
        the dates allow. A name with no record left (15 days, or started elsewhere) is
        missing from the answer.
        """
        found: dict[str, str] = {}
        for low, high in _spans(sorted(started.values()), GROUP_LOOKUP_MARGIN_SECONDS):
            request: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
                "ExpressionAttributeValues": {
                    ":pk": {"S": self._partition},
                    ":low": {"S": sort_key(max(0.0, low - GROUP_LOOKUP_MARGIN_SECONDS), "")},
                    ":high": {"S": sort_key(high + GROUP_LOOKUP_MARGIN_SECONDS, "~")},
                },
                "ProjectionExpression": "#names, #groups, #name, #group",
                "ExpressionAttributeNames": {
                    "#names": "names",
                    "#groups": "groups",
                    "#name": "name",
                    "#group": "group",
                },
            }
            for item in self._query(request):
                for name, group in item_groups(item).items():
                    if name in started:
                        found.setdefault(name, group)
        return found

    def _query(self, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every item a Query returns, page after page."""
        while True:
            with translated(f"Query on state table {self.table}"):
                page = self._client.query(**request)
            yield from page.get("Items", [])
            last_key = page.get("LastEvaluatedKey")
            if not last_key:
                return
            request["ExclusiveStartKey"] = last_key

    def forget(self, records: Sequence[RecordedStart], now: float) -> int:
        """Void records that no longer count (ended, superseded, never started); return how many were left.

        One item names up to 500 of them; the records themselves (and their groups) stay.
        Best effort: a record left behind is reviewed again next tick and found settled
        again (or holds its slot for at most the window), so a failure here costs calls or
        a little capacity, never the cap.
        """
        packs = chunks(records, PACK_LIMIT)
        items = [void_item(self._partition, pack, now) for pack in packs]
        return self._write_packs(packs, items, (TransientError, ClientError))
