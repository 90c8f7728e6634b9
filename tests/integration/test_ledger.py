"""The state table's adapters against moto, through real boto3 calls: the start ledger and re-run claims."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dispatcher.adapters.claims import RerunClaims
from dispatcher.adapters.item_keys import sort_key
from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.adapters.state_items import partition
from dispatcher.core.counting import LedgerRequest, LedgerStart, StateWindow
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.events import EndedExecution
from tests.support.moto_harness import Harness
from tests.support.records import starts_at


def state_table(harness: Harness, arn: str | None = None, table: str | None = None) -> StartLedgerTable:
    """The start ledger over the harness's state table (or ``table``), for ``arn``."""
    return StartLedgerTable(
        harness.dynamodb, table or harness.stack.state_table, arn or harness.stack.state_machine_arn
    )


def test_state_table_round_trip(harness: Harness) -> None:
    """Recorded starts and ends are read back newest-window only; starts are forgotten on request."""
    table = state_table(harness)
    now = time.time()
    [old] = starts_at(table, {"old": "group"}, now - 200)
    fresh = starts_at(table, {"fresh": "group", "other": "group"}, now)
    assert table.record([old]) == []
    assert table.record(fresh) == []
    assert table.note_ended([EndedExecution(name="fresh", stopped_at=now - 1)], now) == 0
    window = table.window(now - 90)
    assert window.starts == tuple(fresh)
    assert window.ended == (
        EndedExecution(
            name="fresh",
            stopped_at=float(f"{now - 1:.6f}"),
            state_machine_arn=harness.stack.state_machine_arn,
        ),
    )
    assert table.void([old, *fresh], now) == 0
    assert table.window(now - 1000).starts == ()


def test_state_table_writes_a_batch_of_ends_once_per_name_500_an_item(harness: Harness) -> None:
    """Each name once with its latest stop, 500 ends an item in one `BatchWriteItem`, what's left counted."""
    table = state_table(harness)
    now = time.time()
    calls: list[list[int]] = []
    written: list[dict[str, Any]] = []

    def count_items(params: dict[str, Any], **_: Any) -> None:
        items = [
            request["PutRequest"]["Item"] for request in params["RequestItems"][harness.stack.state_table]
        ]
        calls.append([len(item["names"]["L"]) for item in items])
        written[:] = items

    harness.dynamodb.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", count_items)
    ended = [EndedExecution(name=f"job-{index}", stopped_at=now - 10) for index in range(30)]
    ended += [
        EndedExecution(name="job-3", stopped_at=now - 5),
        EndedExecution(name="job-4", stopped_at=now - 20),
    ]
    assert table.note_ended(ended, now) == 0
    assert calls == [[30]], "one item holds them all"
    stops = {end.name: end.stopped_at for end in table.window(now - 90).ended}
    assert len(stops) == 30
    assert stops["job-3"] == float(f"{now - 5:.6f}"), "the latest stop of a name reported twice"
    assert stops["job-4"] == float(f"{now - 10:.6f}")
    many = [EndedExecution(name=f"many-{index}", stopped_at=now - 1) for index in range(1001)]
    assert table.note_ended(many, now + 1) == 0
    assert calls[-1] == [500, 500, 1]
    assert len(table.window(now - 90).ended) == 30 + 1001

    def leave_the_item_unprocessed(parsed: dict[str, Any], **_: Any) -> None:
        parsed["UnprocessedItems"] = {
            harness.stack.state_table: [{"PutRequest": {"Item": item}} for item in written[:1]]
        }

    harness.dynamodb.meta.events.register("after-call.dynamodb.BatchWriteItem", leave_the_item_unprocessed)
    assert table.note_ended(ended[:3], now) == 3, "the item's every end"


def test_state_table_keeps_groups_after_records_stop_counting(harness: Harness) -> None:
    """A start's message group outlives its count: `groups` finds it near the start date, resolved or not."""
    table = state_table(harness)
    now = time.time()
    early = starts_at(table, {"early": "customer-1"}, now - 3600)
    late = starts_at(table, {"late": "customer-2", "kept": "customer-3"}, now)
    table.record(early)
    table.record(late)
    assert table.void([*early, late[0]], now) == 0
    assert table.window(now - 90).starts == (late[1],)
    started = {"early": now - 3600 + 2, "late": now + 1, "kept": now, "unknown": now - 1800}
    assert table.groups(started) == {"early": "customer-1", "late": "customer-2", "kept": "customer-3"}
    assert table.groups({"early": now}) == {}, "a record far from the start date is not the execution's"


def test_state_table_packs_what_is_written_together_into_one_item(harness: Harness) -> None:
    """25 starts of one round are one item, their void another; both keep every fact a record had."""
    table = state_table(harness)
    now = time.time()
    records = starts_at(
        table, {f"job-{index}": f"group-{index % 3}" for index in range(25)}, now, {"job-7": 2}
    )
    assert table.record(records) == []
    assert table.void(records[:5], now + 1) == 0
    items = harness.dynamodb.query(
        TableName=harness.stack.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": partition(harness.stack.state_machine_arn)}},
    )["Items"]
    assert [item["kind"]["S"] for item in items] == ["starts", "void"]
    window = table.window(now - 90)
    assert window.starts == tuple(records[5:])
    assert window.void == {record.sort_key for record in records[:5]}
    assert next(record for record in window.starts if record.name == "job-7").redrive_count == 2
    started = {record.name: now for record in records}
    assert table.groups(started) == {f"job-{index}": f"group-{index % 3}" for index in range(25)}


def test_a_void_never_applies_to_a_later_start_of_the_same_name_at_the_same_clock_reading(
    harness: Harness,
) -> None:
    """Recorded, voided (never started), recorded again at the same time: the second record counts.

    The soak found this: with a clock that stands still, the void of the first record
    named the second's key too, the started execution went uncounted and the cap broke.
    """
    table = state_table(harness)
    now = time.time()
    first = starts_at(table, {"job": "g"}, now)
    assert table.record(first) == []
    assert table.void(first, now) == 0
    again = starts_at(table, {"job": "g"}, now)
    assert table.record(again) == []
    assert again[0].sort_key != first[0].sort_key
    assert table.window(now - 90).starts == tuple(again)


def test_state_table_reads_an_older_releases_items_of_one_record(harness: Harness) -> None:
    """A start, a start marked resolved and an end written one item each still count as they did."""
    now = time.time()
    key = partition(harness.stack.state_machine_arn)

    def put(sk: str, **attributes: dict[str, Any]) -> None:
        harness.dynamodb.put_item(
            TableName=harness.stack.state_table, Item={"pk": {"S": key}, "sk": {"S": sk}, **attributes}
        )

    at = {"N": f"{now:.6f}"}
    put(sort_key(now, "old"), name={"S": "old"}, recorded_at=at, group={"S": "g"}, redrive_count={"N": "1"})
    put(sort_key(now, "done"), name={"S": "done"}, recorded_at=at, group={"S": "h"}, resolved={"BOOL": True})
    put(sort_key(now, "ended#gone"), kind={"S": "ended"}, name={"S": "gone"}, stopped_at=at)
    window = state_table(harness).window(now - 90)
    assert [(record.name, record.group, record.redrive_count) for record in window.starts] == [
        ("old", "g", 1)
    ]
    assert window.ended == (
        EndedExecution(
            name="gone", stopped_at=float(f"{now:.6f}"), state_machine_arn=harness.stack.state_machine_arn
        ),
    )
    assert state_table(harness).groups({"old": now, "done": now}) == {"old": "g", "done": "h"}


def test_state_table_reports_unprocessed_starts(harness: Harness) -> None:
    """Starts DynamoDB leaves in UnprocessedItems come back, so they are not started."""
    table = state_table(harness)
    now = time.time()
    records = [*starts_at(table, {"a": "group"}, now), *starts_at(table, {"b": "group"}, now + 0.001)]

    def leave_b_unprocessed(parsed: dict[str, Any], **_: Any) -> None:
        item = {"pk": {"S": "p"}, "sk": {"S": records[1].sort_key}, "name": {"S": "b"}}
        parsed["UnprocessedItems"] = {harness.stack.state_table: [{"PutRequest": {"Item": item}}]}

    harness.dynamodb.meta.events.register("after-call.dynamodb.BatchWriteItem", leave_b_unprocessed)
    assert table.record(records) == [records[1]]


def test_state_table_holds_every_lanes_records_each_naming_its_state_machine(harness: Harness) -> None:
    """Starts of two state machines, one name in both, are one item; each keeps its machine, key and group.

    A void of one leaves the other counting; an end names its machine; a group is looked up per machine.
    """
    table = state_table(harness)
    own, glue = harness.stack.state_machine_arn, f"{harness.stack.state_machine_arn}-glue"
    now = time.time()
    lanes = [LedgerRequest(own, {"job": "g-own"}), LedgerRequest(glue, {"job": "g-glue", "solo": "g-solo"})]
    mine, theirs = table.starts_of(lanes, now)
    assert mine[0].sort_key != theirs[0].sort_key
    written: list[dict[str, Any]] = []
    harness.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.BatchWriteItem",
        lambda params, **_: written.extend(params["RequestItems"][harness.stack.state_table]),
    )
    assert table.record([*mine, *theirs]) == []
    assert len(written) == 1, "one item holds both state machines' starts"
    window = table.window(now - 90)
    assert sorted((r.state_machine_arn, r.name, r.group) for r in window.starts) == [
        (own, "job", "g-own"),
        (glue, "job", "g-glue"),
        (glue, "solo", "g-solo"),
    ]
    assert set(window.starts) == {*mine, *theirs}
    assert table.void([theirs[0]], now) == 0
    assert set(table.window(now - 90).starts) == {mine[0], theirs[1]}
    ends = [
        EndedExecution(name="job", stopped_at=now, state_machine_arn=glue),
        EndedExecution(name="job", stopped_at=now),
    ]
    assert table.note_ended(ends, now) == 0
    assert sorted(end.state_machine_arn for end in table.window(now - 90).ended) == sorted([own, glue])
    assert table.groups({"job": now}) == {"job": "g-own"}
    assert table.groups({"job": now, "solo": now}, glue) == {"job": "g-glue", "solo": "g-solo"}


def test_state_table_is_per_state_machine(harness: Harness) -> None:
    """Two dispatchers (keyed by their default lanes' machines) sharing a table don't see each other's."""
    one = state_table(harness, "arn:one")
    other = state_table(harness, "arn:other")
    one.record(starts_at(one, {"a": "group"}, time.time()))
    one.note_ended([EndedExecution(name="a", stopped_at=1.0)], time.time())
    assert other.window(0) == StateWindow()


def test_rerun_claims_give_each_failure_to_one_mode(harness: Harness) -> None:
    """The first mode to claim a failure keeps it; the same mode may claim again; a later failure is free."""
    claims = RerunClaims(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    now = time.time()
    assert claims.claimed("order-1", 0) is None
    assert claims.claim("order-1", 0, "redrive", now) is None
    assert claims.claim("order-1", 0, "redrive", now + 1) is None, "a rerun run again, or a retried write"
    assert claims.claim("order-1", 0, "restart", now + 2) == "redrive"
    assert claims.claimed("order-1", 0) == "redrive"
    assert claims.claim("order-1", 1, "restart", now + 3) is None, "failed again after its redrive"
    other = RerunClaims(harness.dynamodb, harness.stack.state_table, "arn:other")
    assert other.claim("order-1", 0, "restart", now) is None, "claims are per state machine"
    item = harness.dynamodb.get_item(
        TableName=harness.stack.state_table,
        Key={"pk": {"S": f"rerun#{harness.stack.state_machine_arn}"}, "sk": {"S": "order-1#0"}},
    )["Item"]
    assert int(item["expires_at"]["N"]) == int(now + 1) + 15 * 24 * 3600, "the latest claim, kept 15 days"
    assert state_table(harness).window(0) == StateWindow(), "no tick reads them"
    missing = RerunClaims(harness.dynamodb, "missing-table", "arn:x")
    with pytest.raises(ConfigurationError, match="missing-table"):
        missing.claim("order-1", 0, "restart", now)
    with pytest.raises(ConfigurationError, match="missing-table"):
        missing.claimed("order-1", 0)


def test_state_table_missing_table_is_a_configuration_error(harness: Harness) -> None:
    """Every state table call against a missing table names it."""
    table = state_table(harness, "arn:x", "missing-table")
    with pytest.raises(ConfigurationError, match="missing-table"):
        table.window(0)
    with pytest.raises(ConfigurationError, match="missing-table"):
        table.record(starts_at(table, {"a": "group"}, 1.0))
    with pytest.raises(ConfigurationError, match="missing-table"):
        table.note_ended([EndedExecution(name="a", stopped_at=1.0)], 1.0)
    with pytest.raises(ConfigurationError, match="missing-table"):
        table.void([LedgerStart(name="a", recorded_at=1.0, sort_key="1#a")], 1.0)
