"""What an invocation's event says has ended: one status change event, or an SQS batch of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dispatcher.core.events import (
    EndedExecution,
    EndNews,
    SkippedRecord,
    Wake,
    describe_trigger,
    end_news,
    is_sqs_batch,
)
from tests.support.events import MACHINE, record, status_change

SAMPLE = Path(__file__).parents[2] / "events" / "end-event-batch.json"


def test_a_batch_frees_every_end_of_the_machine_and_skips_every_other_record_with_a_reason() -> None:
    """Ends of the state machine count, duplicates included; anything else is skipped, never fatal."""
    event = {
        "Records": [
            record(status_change(name="a", stopDate=1_000_000), "m-a"),
            record("not json", "m-text"),
            record(status_change(name="b", status="FAILED", stopDate=2_000_000), "m-b"),
            record(status_change(stateMachineArn=MACHINE + "-other"), "m-other"),
            record(status_change(status="RUNNING", stopDate=None), "m-running"),
            record({"detail-type": "Scheduled Event", "detail": {}}, "m-scheduled"),
            record(status_change(name="a", stopDate=1_500_000), "m-a-again"),
            {**record("{}", "m-no-body"), "body": None},
            record(status_change(name="bad name"), "m-bad-name"),
        ]
    }
    news = end_news(event, MACHINE)
    assert news.records == 9
    assert news.ended == (
        EndedExecution(name="a", stopped_at=1000.0, state_machine_arn=MACHINE),
        EndedExecution(name="b", stopped_at=2000.0, state_machine_arn=MACHINE),
        EndedExecution(name="a", stopped_at=1500.0, state_machine_arn=MACHINE),
    )
    assert news.skipped == (
        SkippedRecord("m-text", "the body is not JSON"),
        SkippedRecord("m-other", f"a status change of another state machine ({MACHINE}-other)"),
        SkippedRecord("m-running", "status RUNNING is not an end"),
        SkippedRecord("m-scheduled", "not a status change event"),
        SkippedRecord("m-no-body", "the body is not JSON"),
        SkippedRecord("m-bad-name", "invalid execution name 'bad name'"),
    )


def test_a_record_without_a_stop_time_is_skipped_and_one_without_an_id_is_named_by_position() -> None:
    """Without stopDate or time a redrive couldn't be told apart: skipped, like the single event."""
    change = status_change(stopDate=None)
    del change["time"]
    unnamed = record(change)
    del unnamed["messageId"]
    assert end_news({"Records": [unnamed]}, MACHINE) == EndNews(
        skipped=(SkippedRecord("record 0", "neither detail.stopDate nor time says when it ended"),),
        records=1,
    )


def test_ends_of_every_lanes_state_machine_are_read_and_name_their_machine() -> None:
    """With lanes, a batch carries ends of several state machines: each names its own."""
    other = MACHINE + "-other"
    event = {
        "Records": [
            record(status_change(name="a", stopDate=1_000_000), "m-a"),
            record(status_change(name="b", stateMachineArn=other, stopDate=2_000_000), "m-b"),
            record(status_change(stateMachineArn=MACHINE + "-third"), "m-third"),
        ]
    }
    news = end_news(event, (MACHINE, other))
    assert news.ended == (
        EndedExecution(name="a", stopped_at=1000.0, state_machine_arn=MACHINE),
        EndedExecution(name="b", stopped_at=2000.0, state_machine_arn=other),
    )
    assert [skipped.message_id for skipped in news.skipped] == ["m-third"]
    assert (
        end_news(status_change(stateMachineArn=other), frozenset({other})).ended[0].state_machine_arn == other
    )


def test_a_single_event_is_still_one_end_and_not_a_batch() -> None:
    """A status change event invoking the function directly stays valid."""
    assert end_news(status_change(), MACHINE) == EndNews(
        ended=(EndedExecution(name="job-1", stopped_at=1_795_262_404.5, state_machine_arn=MACHINE),)
    )
    assert end_news({}, MACHINE) == EndNews()


@pytest.mark.parametrize(
    "event",
    [
        {"Records": []},
        {"Records": [{"eventSource": "aws:s3", "body": "{}"}]},
        {"Records": [record(status_change()), {"eventSource": "aws:sns"}]},
        {"Records": "nope"},
        {"Records": [None]},
        [record(status_change())],
    ],
    ids=["empty", "s3", "mixed-sources", "not-a-list", "null-record", "bare-list"],
)
def test_only_records_all_from_sqs_are_a_batch(event: object) -> None:
    """Any other shape with `Records` is an ordinary tick: nothing ends, nothing fails."""
    assert not is_sqs_batch(event)
    assert end_news(event, MACHINE) == EndNews()


def test_the_sample_batch_in_events_frees_its_two_ends_and_skips_the_third_record() -> None:
    """events/end-event-batch.json, the sample `sam local invoke -e` takes, reads as documented."""
    event = json.loads(SAMPLE.read_text())
    machine = json.loads(event["Records"][0]["body"])["detail"]["stateMachineArn"]
    news = end_news(event, machine)
    assert [end.name for end in news.ended] == ["job-1", "job-2"]
    assert [skipped.reason for skipped in news.skipped] == ["the body is not JSON"]
    assert describe_trigger(event) == "a batch of 3 end event record(s) from SQS"


def test_a_wake_in_a_batch_frees_nothing_is_not_skipped_and_names_only_what_it_says() -> None:
    """``{"wake": true}`` or a member's name (an unknown one too) is a wake; any other value is skipped."""
    event = {
        "Records": [
            record({"wake": True}, "m-wake"),
            record(status_change(name="a", stopDate=1_000_000), "m-a"),
            record({"wake": "no-such-lane"}, "m-named"),
            record({"wake": False}, "m-false"),
            record({"wake": ""}, "m-empty"),
            record({"wake": True, "release": "x", "gate": "g"}, "m-release"),
        ]
    }
    news = end_news(event, MACHINE)
    assert news.records == 6
    assert news.wakes == (Wake(), Wake("no-such-lane"))
    assert news.ended == (EndedExecution(name="a", stopped_at=1000.0, state_machine_arn=MACHINE),)
    assert news.skipped == (
        SkippedRecord("m-false", "a wake's 'wake' must be true or the name of a lane or gate, not false"),
        SkippedRecord("m-empty", "a wake's 'wake' must be true or the name of a lane or gate, not " + '""'),
        SkippedRecord("m-release", "'x' is not an execution ARN"),
    )
    assert news.releases == ()


def test_a_wake_invoking_the_function_directly_is_a_wake_and_one_tick() -> None:
    """As a direct event, a wake is one tick like any object; a malformed one is named, never fatal."""
    assert end_news({"wake": True}, MACHINE) == EndNews(wakes=(Wake(),))
    assert end_news({"wake": "default"}, MACHINE) == EndNews(wakes=(Wake("default"),))
    assert end_news({"wake": 3}, MACHINE).skipped == (
        SkippedRecord("the event", "a wake's 'wake' must be true or the name of a lane or gate, not 3"),
    )
    assert describe_trigger({"wake": True}) == "a wake"


def test_a_wake_is_dated_by_its_record_s_sent_timestamp_or_the_invocation_s_clock() -> None:
    """SQS's ``SentTimestamp`` (epoch milliseconds) dates a wake in a batch; a direct one is sent ``now``."""
    batch = {"Records": [{**record({"wake": True}), "attributes": {"SentTimestamp": "1795262404500"}}]}
    assert end_news(batch, MACHINE, now=7.0).wakes == (Wake(sent_at=1_795_262_404.5),)
    assert end_news({"wake": "default"}, MACHINE, now=7.0).wakes == (Wake("default", 7.0),)
