"""The AWS adapters of Step Functions and SQS against moto, through real boto3 calls."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from dispatcher.adapters.sqs import DeadLetterQueue, SourceQueue
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.core.admission import DeadLetter
from dispatcher.core.errors import (
    ConfigurationError,
    ExecutionExistsError,
    RejectedInputError,
    TransientError,
)
from dispatcher.core.executions import execution_arn
from dispatcher.core.messages import QueuedMessage
from tests.support.moto_harness import Harness


@pytest.fixture
def machine(harness: Harness) -> StateMachine:
    """The harness's state machine adapter."""
    return StateMachine(harness.sfn, harness.stack.state_machine_arn)


def note_list_requests(harness: Harness) -> list[dict[str, Any]]:
    """Every `ListExecutions` request's parameters, noted as they are made."""
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
