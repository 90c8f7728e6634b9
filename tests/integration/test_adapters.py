"""Each AWS adapter against moto, through real boto3 calls."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from dispatcher.adapters.claims import RerunClaims
from dispatcher.adapters.item_keys import sort_key
from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.adapters.sqs import DeadLetterQueue, SourceQueue
from dispatcher.adapters.state_items import partition
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.core.admission import DeadLetter
from dispatcher.core.counting import LedgerRequest, LedgerStart, StateWindow
from dispatcher.core.errors import (
    ConfigurationError,
    ExecutionExistsError,
    RejectedInputError,
    TransientError,
)
from dispatcher.core.events import EndedExecution
from dispatcher.core.executions import execution_arn
from dispatcher.core.messages import QueuedMessage
from tests.integration.conftest import Harness
from tests.support.records import starts_at


@pytest.fixture
def machine(harness: Harness) -> StateMachine:
    return StateMachine(harness.sfn, harness.stack.state_machine_arn)


def note_list_requests(harness: Harness) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = []
    harness.sfn.meta.events.register(
        "provide-client-params.states.ListExecutions", lambda params, **_: requests.append(dict(params))
    )
    return requests


def more_pages_after_the_first(harness: Harness) -> None:
    """The first page says more follow (as with over 1000 RUNNING), without starting 1000 executions."""

    def add_token(parsed: dict[str, Any], **_: Any) -> None:
        parsed.setdefault("nextToken", "more")

    harness.sfn.meta.events.register("after-call.states.ListExecutions", add_token)


def test_list_running_asks_for_full_pages_and_stops_paging_at_max(
    harness: Harness, machine: StateMachine
) -> None:
    """Pages of 1000; once MAX executions hold a slot, no further page is read and the listing is partial."""
    for index in range(7):
        harness.start_directly(f"busy-{index}")
    requests = note_list_requests(harness)
    more_pages_after_the_first(harness)
    listing = machine.list_running(3, {}, listed_at=1.0)
    assert len(listing.executions) == 7
    assert not listing.complete
    assert listing.listed_at == 1.0
    assert [request["maxResults"] for request in requests] == [1000]


def test_list_running_pages_past_executions_known_to_have_ended(
    harness: Harness, machine: StateMachine
) -> None:
    """Listed executions an event says ended don't count toward MAX, so paging goes on past them."""
    for index in range(3):
        harness.start_directly(f"busy-{index}")
    ended = {"busy-2": time.time() + 60, "busy-1": time.time() + 60}
    requests = note_list_requests(harness)
    pages = iter([["busy-2", "busy-1"], ["busy-0"]])

    def page_by_page(parsed: dict[str, Any], **_: Any) -> None:
        names = next(pages)
        parsed["executions"] = [item for item in parsed["executions"] if item["name"] in names]
        if names != ["busy-0"]:
            parsed["nextToken"] = "page-2"

    def drop_token(params: dict[str, Any], **_: Any) -> None:
        params.pop("nextToken", None)  # moto has no second page to give: the hook above makes them

    harness.sfn.meta.events.register("provide-client-params.states.ListExecutions", drop_token)
    harness.sfn.meta.events.register("after-call.states.ListExecutions", page_by_page)
    listing = machine.list_running(1, ended, listed_at=1.0)
    assert len(requests) == 2
    assert set(listing.executions) == {"busy-2", "busy-1", "busy-0"}
    assert listing.complete


def test_list_running_reads_everything_below_max(harness: Harness, machine: StateMachine) -> None:
    """With fewer RUNNING than MAX, the list is read completely and names are known."""
    for index in range(4):
        harness.start_directly(f"busy-{index}")
    listing = machine.list_running(10, {}, listed_at=1.0)
    assert listing.complete
    assert listing.executions == {f"busy-{index}": None for index in range(4)}


def test_list_running_ignores_finished_executions(harness: Harness, machine: StateMachine) -> None:
    """Only RUNNING executions are listed."""
    harness.start_directly("done")
    harness.finish_running()
    harness.start_directly("busy")
    assert set(machine.list_running(10, {}, listed_at=1.0).executions) == {"busy"}


def test_list_running_reads_the_redrive_date(harness: Harness, machine: StateMachine) -> None:
    """A listed execution's redriveDate comes back in epoch seconds."""
    harness.start_directly("again")

    def redriven(parsed: dict[str, Any], **_: Any) -> None:
        for item in parsed["executions"]:
            item["redriveDate"] = datetime(2026, 11, 21, 12, 0, 1, tzinfo=UTC)

    harness.sfn.meta.events.register("after-call.states.ListExecutions", redriven)
    listing = machine.list_running(10, {}, listed_at=1.0)
    assert listing.executions == {"again": datetime(2026, 11, 21, 12, 0, 1, tzinfo=UTC).timestamp()}


def test_start_existing_closed_name_raises_exists(harness: Harness, machine: StateMachine) -> None:
    """Starting a closed execution's name again raises ExecutionExistsError."""
    machine.start("job-1", "{}")
    harness.finish_running()
    with pytest.raises(ExecutionExistsError):
        machine.start("job-1", "{}")


def test_has_input_compares_inputs(machine: StateMachine) -> None:
    """The same input (even re-spaced JSON) matches; another input doesn't."""
    machine.start("job-1", '{"a": 1}')
    assert machine.has_input("job-1", '{"a": 1}')
    assert machine.has_input("job-1", '{"a":1}')
    assert not machine.has_input("job-1", '{"a": 2}')


def test_has_input_of_an_execution_describe_does_not_show_yet_is_transient(machine: StateMachine) -> None:
    """The name exists but DescribeExecution (eventually consistent) can't see it yet: retry later."""
    with pytest.raises(TransientError, match="does not show the existing execution yet"):
        machine.has_input("started-a-moment-ago", "{}")


def test_status_of_unknown_execution_is_none(machine: StateMachine) -> None:
    """An execution that was never started has no status."""
    assert machine.state_of("never-started") is None


def test_start_rejected_input_is_poison(machine: StateMachine) -> None:
    """Input Step Functions refuses raises RejectedInputError (the message is poison)."""
    with pytest.raises(RejectedInputError):
        machine.start("job-1", "not json")


def test_execution_arn_is_deterministic(machine: StateMachine) -> None:
    """The execution ARN follows from the state machine ARN and the name."""
    assert execution_arn(machine.arn, "job-1").endswith(":execution:" + machine.arn.split(":")[-1] + ":job-1")


def _message(harness: Harness, body: str = "{}") -> QueuedMessage:
    harness.send(body, name="named-1")
    [received] = SourceQueue(harness.sqs, harness.stack.queue_url, wait_seconds=0).receive(10)
    return received


def test_receive_reads_group_name_and_attributes(harness: Harness) -> None:
    """A received message carries its group, ExecutionName and receive count."""
    message = _message(harness, '{"job": 1}')
    assert message.group_id == "g"
    assert message.execution_name == "named-1"
    assert message.execution_name_type == "String"
    assert message.receive_count == 1
    assert message.body == '{"job": 1}'


def test_delete_and_release_report_stale_receipt_handles(harness: Harness) -> None:
    """A receipt handle SQS refuses comes back as failed, nothing raises."""
    queue = SourceQueue(harness.sqs, harness.stack.queue_url, wait_seconds=0)
    stale = _message(harness).model_copy(update={"receipt_handle": "not-a-handle"})
    assert queue.delete([stale]) == [stale]
    assert queue.make_visible([stale]) == [stale]


def test_delete_and_release_on_a_missing_queue_are_configuration_errors(harness: Harness) -> None:
    """A queue that is gone (or forbidden) would fail every tick: delete and release raise, naming it."""
    message = _message(harness)
    gone = SourceQueue(harness.sqs, harness.stack.queue_url + "-gone", wait_seconds=0)
    with pytest.raises(
        ConfigurationError, match=r"DeleteMessageBatch on .*-gone failed with .*NonExistentQueue"
    ):
        gone.delete([message])
    with pytest.raises(ConfigurationError, match=r"ChangeMessageVisibilityBatch on .*-gone"):
        gone.make_visible([message])


def test_dead_letter_keeps_body_group_attributes_and_reason(harness: Harness) -> None:
    """The DLQ copy keeps body, group and ExecutionName, dedups on MessageId and says why."""
    message = _message(harness, "not json")
    failed = DeadLetterQueue(harness.sqs, harness.stack.dead_letter_queue_url).send(
        [DeadLetter(message, "why")]
    )
    assert failed == []
    [letter] = harness.dead_letters()
    assert letter["Body"] == "not json"
    assert letter["Attributes"]["MessageGroupId"] == "g"
    assert letter["Attributes"]["MessageDeduplicationId"] == message.message_id
    assert letter["MessageAttributes"]["DispatchError"]["StringValue"] == "why"
    assert letter["MessageAttributes"]["ExecutionName"]["StringValue"] == "named-1"


def test_dead_letter_to_missing_queue_is_a_configuration_error(harness: Harness) -> None:
    """A DLQ that doesn't exist stops the tick: poison must not be dropped."""
    message = _message(harness)
    dead_letters = DeadLetterQueue(harness.sqs, harness.stack.dead_letter_queue_url + "-gone")
    with pytest.raises(ConfigurationError):
        dead_letters.send([DeadLetter(message, "why")])


def test_dead_letter_refused_message_is_returned_failed(harness: Harness) -> None:
    """A message SQS refuses to store (here: too large with its attributes) is reported failed."""
    message = _message(harness).model_copy(update={"body": "x" * (1024 * 1024 + 1)})
    dead_letters = DeadLetterQueue(harness.sqs, harness.stack.dead_letter_queue_url)
    letter = DeadLetter(message, "too large")
    assert dead_letters.send([letter]) == [letter]


def state_table(harness: Harness, arn: str | None = None, table: str | None = None) -> StartLedgerTable:
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
