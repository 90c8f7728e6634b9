"""DynamoDB: the state table's recent starts and ends, the dispatcher's memory for counting.

``ListExecutions`` may omit an execution for up to a minute after it started, so a
start is written here *before* ``StartExecution`` and, whenever the list doesn't show
it, counts as running until ``DescribeExecution`` says it ended or the record is 90 s
old. The list also keeps showing an execution for a while after it ended, so the end a
status change event reports is written here too, and every tick of the next 90 s
leaves that execution out.

Keys: ``pk`` = ``recent-start#<state machine ARN>``; ``sk`` = ``<written at, fixed
width>#<execution name>`` for a start, ``<written at>#ended#<execution name>`` for an
end (an execution name can't contain ``#``), so one query reads the whole window.

A start record also keeps the job's message group, for 15 days (Step Functions'
redrive window is 14): ``dispatcher rerun --restart`` finds it near the execution's
start date. A record that stops counting is overwritten with ``resolved`` rather than
deleted (the same one write), so the group outlives the count.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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
    return [
        RecordedStart(
            name=name,
            recorded_at=now,
            sort_key=sort_key(now, name),
            group=group,
            redrive_count=redrives.get(name),
        )
        for name, group in groups.items()
    ]


def start_item(partition_key: str, record: RecordedStart, *, resolved: bool = False) -> dict[str, Any]:
    """A start record as the table holds it (``resolved``: it no longer counts, its group stays)."""
    item: dict[str, Any] = {
        "pk": {"S": partition_key},
        "sk": {"S": record.sort_key},
        "name": {"S": record.name},
        "recorded_at": {"N": f"{record.recorded_at:.6f}"},
        "expires_at": {"N": str(int(record.recorded_at) + START_RECORD_LIFETIME_SECONDS)},
    }
    if record.group is not None:
        item["group"] = {"S": record.group}
    if record.redrive_count is not None:
        item["redrive_count"] = {"N": str(record.redrive_count)}
    if resolved:
        item["resolved"] = {"BOOL": True}
    return item


def ended_item(partition_key: str, ended: EndedExecution, now: float) -> dict[str, Any]:
    """An end a status change event reported, as the table holds it."""
    now = _stored_time(now)
    return {
        "pk": {"S": partition_key},
        "sk": {"S": sort_key(now, f"{ENDED_KIND}#{ended.name}")},
        "kind": {"S": ENDED_KIND},
        "name": {"S": ended.name},
        "stopped_at": {"N": f"{ended.stopped_at:.6f}"},
        "recorded_at": {"N": f"{now:.6f}"},
        "expires_at": {"N": str(int(now) + RECORD_LIFETIME_SECONDS)},
    }


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

    def _start_item(self, record: RecordedStart, *, resolved: bool = False) -> dict[str, Any]:
        return start_item(self._partition, record, resolved=resolved)

    def record(self, records: Sequence[RecordedStart]) -> list[RecordedStart]:
        """Write starts (at most 25, distinct names) before they happen; return those left unprocessed.

        An unprocessed start must not happen in this round. A call still failing after
        botocore's retries raises (its records may or may not have been written).
        """
        requests: list[WriteRequestTypeDef] = [
            {"PutRequest": {"Item": self._start_item(record)}} for record in records
        ]
        with translated(f"BatchWriteItem on state table {self.table}"):
            response = self._client.batch_write_item(RequestItems={self.table: requests})
        unprocessed = {
            request["PutRequest"]["Item"]["sk"]["S"]
            for request in response.get("UnprocessedItems", {}).get(self.table, [])
            if "PutRequest" in request
        }
        return [record for record in records if record.sort_key in unprocessed]

    def note_ended(self, ended: Sequence[EndedExecution], now: float) -> int:
        """Remember for the review window the ends status change events reported; how many were left.

        A name reported more than once is written once, with its latest stop; 25 ends a
        `BatchWriteItem`. Best effort: an end left unwritten only means that later ticks
        count the execution until the list stops showing it, which is safe.
        """
        left = 0
        latest = [EndedExecution(name=name, stopped_at=at) for name, at in latest_ends(ended).items()]
        for chunk in chunks(latest, BATCH_WRITE_LIMIT):
            requests: list[WriteRequestTypeDef] = [
                {"PutRequest": {"Item": ended_item(self._partition, end, now)}} for end in chunk
            ]
            try:
                with translated(f"BatchWriteItem on state table {self.table}"):
                    response = self._client.batch_write_item(RequestItems={self.table: requests})
            except TransientError:
                left += len(chunk)
                continue
            left += len(response.get("UnprocessedItems", {}).get(self.table, []))
        return left

    def window(self, oldest: float) -> StateWindow:
        """Starts and ends written at or after ``oldest``, read strongly consistently."""
        starts: list[RecordedStart] = []
        ended: list[EndedExecution] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk >= :oldest",
            "ExpressionAttributeValues": {
                ":pk": {"S": self._partition},
                ":oldest": {"S": sort_key(oldest, "")},
            },
            "ConsistentRead": True,
        }
        for item in self._query(request):
            if "resolved" in item:
                continue
            if item.get("kind", {}).get("S") == ENDED_KIND:
                ended.append(
                    EndedExecution(name=item["name"]["S"], stopped_at=float(item["stopped_at"]["N"]))
                )
            else:
                starts.append(
                    RecordedStart(
                        name=item["name"]["S"],
                        recorded_at=float(item["recorded_at"]["N"]),
                        sort_key=item["sk"]["S"],
                        group=item.get("group", {}).get("S"),
                        redrive_count=_optional_int(item.get("redrive_count", {}).get("N")),
                    )
                )
        return StateWindow(starts=tuple(starts), ended=tuple(ended))

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
                "ProjectionExpression": "#name, #group",
                "ExpressionAttributeNames": {"#name": "name", "#group": "group"},
            }
            for item in self._query(request):
                name, group = item.get("name", {}).get("S"), item.get("group", {}).get("S")
                if name is not None and name in started and group is not None:
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

    def forget(self, records: Sequence[RecordedStart]) -> int:
        """Mark records that no longer count (ended, superseded, never started); return how many were left.

        Each is overwritten as ``resolved`` (one write, like a delete), keeping its group.

        Best effort: a record left behind is reviewed again next tick and found
        resolved again (or holds its slot for at most the window), so a failure here
        costs calls or a little capacity, never the cap.
        """
        left = 0
        for chunk in chunks(records, BATCH_WRITE_LIMIT):
            try:
                with translated(f"BatchWriteItem on state table {self.table}"):
                    response = self._client.batch_write_item(
                        RequestItems={
                            self.table: [
                                {"PutRequest": {"Item": self._start_item(record, resolved=True)}}
                                for record in chunk
                            ]
                        }
                    )
            except (TransientError, ClientError):
                left += len(chunk)
                continue
            left += len(response.get("UnprocessedItems", {}).get(self.table, []))
        return left
