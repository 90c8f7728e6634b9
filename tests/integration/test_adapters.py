"""Each AWS adapter against moto, through real boto3 calls."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dispatcher.adapters.dynamodb import RecentStarts
from dispatcher.adapters.sqs import DeadLetterQueue, SourceQueue
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.errors import ConfigurationError, ExecutionExistsError, RejectedInputError, TransientError
from dispatcher.models import QueuedMessage, RecordedStart
from dispatcher.planning import DeadLetter
from tests.integration.conftest import Harness


@pytest.fixture
def machine(harness: Harness) -> StateMachine:
    return StateMachine(harness.sfn, harness.stack.state_machine_arn)


def test_count_running_stops_paging_at_max(harness: Harness, machine: StateMachine) -> None:
    """With more RUNNING than MAX, one page of MAX is read and the count is MAX."""
    for index in range(7):
        harness.start_directly(f"busy-{index}")
    requests: list[dict[str, Any]] = []
    harness.sfn.meta.events.register(
        "provide-client-params.states.ListExecutions", lambda params, **_: requests.append(dict(params))
    )
    listed = machine.count_running(3)
    assert listed.count == 3
    assert not listed.complete
    assert [request["maxResults"] for request in requests] == [3]


def test_count_running_reads_everything_below_max(harness: Harness, machine: StateMachine) -> None:
    """With fewer RUNNING than MAX, the list is read completely and names are known."""
    for index in range(4):
        harness.start_directly(f"busy-{index}")
    listed = machine.count_running(10)
    assert listed.count == 4
    assert listed.complete
    assert listed.names == {f"busy-{index}" for index in range(4)}


def test_count_running_ignores_finished_executions(harness: Harness, machine: StateMachine) -> None:
    """Only RUNNING executions count."""
    harness.start_directly("done")
    harness.finish_running()
    harness.start_directly("busy")
    assert machine.count_running(10).names == {"busy"}


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
    assert machine.status_of("never-started") is None


def test_start_rejected_input_is_poison(machine: StateMachine) -> None:
    """Input Step Functions refuses raises RejectedInputError (the message is poison)."""
    with pytest.raises(RejectedInputError):
        machine.start("job-1", "not json")


def test_execution_arn_is_deterministic(machine: StateMachine) -> None:
    """The execution ARN follows from the state machine ARN and the name."""
    assert machine.execution_arn("job-1").endswith(":execution:" + machine.arn.split(":")[-1] + ":job-1")


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
    assert queue.release([stale]) == [stale]


def test_delete_and_release_on_a_missing_queue_are_configuration_errors(harness: Harness) -> None:
    """A queue that is gone (or forbidden) would fail every tick: delete and release raise, naming it."""
    message = _message(harness)
    gone = SourceQueue(harness.sqs, harness.stack.queue_url + "-gone", wait_seconds=0)
    with pytest.raises(
        ConfigurationError, match=r"DeleteMessageBatch on .*-gone failed with .*NonExistentQueue"
    ):
        gone.delete([message])
    with pytest.raises(ConfigurationError, match=r"ChangeMessageVisibilityBatch on .*-gone"):
        gone.release([message])


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


def test_recent_starts_round_trip(harness: Harness) -> None:
    """Recorded starts are read back newest-window only, and forgotten on request."""
    ledger = RecentStarts(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    now = time.time()
    old = ledger.record("old", now - 200)
    fresh = ledger.record("fresh", now)
    assert ledger.since(now - 90) == [fresh]
    assert ledger.forget([old, fresh]) == 0
    assert ledger.since(now - 1000) == []


def test_recent_starts_are_per_state_machine(harness: Harness) -> None:
    """Two state machines sharing a table don't see each other's starts."""
    one = RecentStarts(harness.dynamodb, harness.stack.state_table, "arn:one")
    other = RecentStarts(harness.dynamodb, harness.stack.state_table, "arn:other")
    one.record("a", time.time())
    assert other.since(0) == []


def test_recent_starts_missing_table_is_a_configuration_error(harness: Harness) -> None:
    """Every ledger call against a missing table names it."""
    ledger = RecentStarts(harness.dynamodb, "missing-table", "arn:x")
    with pytest.raises(ConfigurationError, match="missing-table"):
        ledger.since(0)
    with pytest.raises(ConfigurationError, match="missing-table"):
        ledger.forget([RecordedStart(name="a", recorded_at=1.0, sort_key="1#a")])
