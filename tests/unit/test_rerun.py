"""Re-run rules without AWS: spooled failures, restarts, redrive jobs, dead-letter moves, lanes, pace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dispatcher.cli.progress import Pace
from dispatcher.core.dead_letters import plan_move, reasons
from dispatcher.core.executions import MAX_NAME_LENGTH, ExecutionState, state_machine_of
from dispatcher.core.messages import Held, deduplication_id
from dispatcher.core.rerun import (
    REDRIVE,
    RESTART,
    Destination,
    Filters,
    Spooled,
    by_execution,
    choose_group,
    counts,
    default_group,
    destination,
    parse_failure,
    plan_rerun,
    restart_name,
)
from dispatcher.producer import Job

NOW = 1_800_000_000.0
ARN = "arn:aws:states:us-east-1:123456789012:execution:jobs:order-1"


# -- spooled failures -----------------------------------------------------------------


def event(  # noqa: PLR0913 — one keyword per field of the event
    name: str = "order-1",
    status: str = "FAILED",
    *,
    stop: float = NOW,
    start: float = NOW - 60,
    redrive_count: int = 0,
    error: str | None = "Api.Unavailable",
    execution_input: str | None = '{"order": 1}',
) -> str:
    """A status change event of a rerun-able failure."""
    return json.dumps(
        {
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "detail": {
                "executionArn": f"arn:aws:states:us-east-1:123456789012:execution:jobs:{name}",
                "name": name,
                "status": status,
                "startDate": int(start * 1000),
                "stopDate": int(stop * 1000),
                "input": execution_input,
                "inputDetails": {"included": execution_input is not None},
                "error": error,
                "cause": "maintenance",
                "redriveCount": redrive_count,
            },
        }
    )


def held(body: str, message_id: str = "s-1") -> Held:
    """A spooled message with ``body``."""
    return Held(message_id=message_id, receipt_handle=f"r-{message_id}", body=body, hidden_until=NOW)


def test_a_spooled_event_reads_as_a_failure() -> None:
    """Name, status, error, times, input and redriveCount come from the event's detail."""
    failure = parse_failure(event(redrive_count=1, execution_input=None))
    assert failure is not None
    assert (failure.name, failure.status, failure.error, failure.redrive_count) == (
        "order-1",
        "FAILED",
        "Api.Unavailable",
        1,
    )
    assert (failure.started_at, failure.stopped_at, failure.input) == (NOW - 60, NOW, None)
    assert failure.as_json()["stopped_at"] == "2027-01-15T08:00:00Z"


@pytest.mark.parametrize("body", ["not json", "{}", event(status="SUCCEEDED"), json.dumps({"detail": {}})])
def test_anything_but_a_failure_event_is_unreadable(body: str) -> None:
    """Other messages on the spool are left alone, not misread."""
    assert parse_failure(body) is None


def test_spool_messages_group_by_execution_at_its_latest_failure() -> None:
    """Repeated events count once; a redriven execution that failed again shows its latest failure."""
    messages = [
        held(event("b", start=NOW - 10), "1"),
        held(event("a", redrive_count=0, stop=NOW - 30, error="First"), "2"),
        held(event("a", redrive_count=1, stop=NOW, error="Again"), "3"),
        held(event("a", redrive_count=0, stop=NOW - 30, error="First"), "4"),
        held("garbage", "5"),
    ]
    spooled, unreadable = by_execution(messages)
    assert [item.failure.name for item in spooled] == ["a", "b"], "oldest start first"
    assert spooled[0].failure.error == "Again"
    assert [message.message_id for message in spooled[0].messages] == ["2", "3", "4"]
    assert [message.message_id for message in unreadable] == ["5"]
    assert counts(item.failure for item in spooled) == {
        "status": {"FAILED": 2},
        "error": {"Again": 1, "Api.Unavailable": 1},
    }


def test_filters_select_by_status_error_name_and_time() -> None:
    """Each filter narrows; globs match error names and execution names."""
    failure = parse_failure(event(status="TIMED_OUT", error="States.Timeout", stop=NOW))
    assert failure is not None
    assert Filters().keep(failure)
    assert Filters(statuses=frozenset({"TIMED_OUT"}), error="States.*", name="order-*").keep(failure)
    assert not Filters(statuses=frozenset({"FAILED"})).keep(failure)
    assert not Filters(error="Api*").keep(failure)
    assert not Filters(name="other-*").keep(failure)
    assert Filters(since=NOW, until=NOW).keep(failure)
    assert not Filters(since=NOW + 1).keep(failure)
    assert not Filters(until=NOW - 1).keep(failure)


# -- planning a re-run ----------------------------------------------------------------


def test_restart_names_are_derived_deterministically_within_80_characters() -> None:
    """The same failure derives the same name; a restart of a restart replaces the suffix."""
    first = restart_name("order-1", ARN)
    assert first == restart_name("order-1", ARN)
    assert first.startswith("order-1-rerun-")
    assert len(first) == len("order-1-rerun-") + 8
    second = restart_name(first, ARN.replace("order-1", first))
    assert second.startswith("order-1-rerun-")
    assert second != first
    long = restart_name("x" * MAX_NAME_LENGTH, ARN)
    assert len(long) == MAX_NAME_LENGTH


def spooled(**fields: object) -> Spooled:
    """A spooled failure of the event with ``fields``."""
    failure = parse_failure(event(**fields))  # type: ignore[arg-type]
    assert failure is not None
    return Spooled(failure, [held(event(**fields))])  # type: ignore[arg-type]


def state(
    status: str = "FAILED", count: int = 0, execution_input: str | None = '{"order": 1}'
) -> ExecutionState:
    """What `DescribeExecution` says of the failed execution."""
    return ExecutionState(status=status, redrive_count=count, input=execution_input)


def test_a_restart_is_a_new_job_with_the_same_input_in_the_group() -> None:
    """Same input, a derived name, a deduplication id of that name and the input, the chosen group."""
    rerun = plan_rerun(spooled(), RESTART, state(), ("customer-7", "recorded"), NOW)
    assert rerun.job == Job('{"order": 1}', "customer-7", restart_name("order-1", ARN))
    assert rerun.as_json()["group_source"] == "recorded"
    assert rerun.as_json()["deduplication_id"] == deduplication_id(
        restart_name("order-1", ARN), '{"order": 1}'
    )


def test_a_redrive_job_names_the_execution_at_its_current_count() -> None:
    """The count is what Step Functions says now: the dispatcher redrives only while it still is."""
    rerun = plan_rerun(spooled(redrive_count=0), REDRIVE, state(count=1), ("g", "default"), NOW)
    assert rerun.job is not None
    assert (rerun.job.name, rerun.job.redrive_count) == ("order-1", 1)
    assert rerun.job.deduplication_id is not None
    assert rerun.job.deduplication_id.startswith("redrive-1-")
    again = plan_rerun(spooled(redrive_count=0), REDRIVE, state(count=1), ("g", "default"), NOW + 3600)
    assert again.job == rerun.job, "the same failure queues the same job"


@pytest.mark.parametrize(
    ("mode", "current", "skip", "resolved"),
    [
        (RESTART, state("RUNNING", 1), "RUNNING since: redriven", True),
        (REDRIVE, state("SUCCEEDED", 1), "SUCCEEDED since: redriven", True),
        (REDRIVE, state("RUNNING", 0), "still shows it RUNNING", False),  # a read that lags the failure
        (RESTART, state("FAILED", -1), "still shows it FAILED", False),
        (REDRIVE, None, "no longer has this execution", False),
        (RESTART, state(execution_input=None), None, False),
    ],
)
def test_reruns_skip_what_is_running_again_or_done(
    mode: str, current: ExecutionState | None, skip: str | None, resolved: bool
) -> None:
    """Nothing is queued for an execution redriven since (its spool messages go), or not yet shown failed."""
    rerun = plan_rerun(spooled(), mode, current, ("g", "default"), NOW)
    if skip is None:
        assert rerun.job is not None
        assert rerun.job.body == '{"order": 1}', "the event's input"
    else:
        assert rerun.job is None
        assert rerun.skip is not None
        assert skip in rerun.skip
    assert rerun.resolved is resolved


def test_reruns_that_cannot_happen_say_why_and_keep_the_failure() -> None:
    """Too late to redrive, or no input anywhere: skipped, spool message kept."""
    late = plan_rerun(spooled(stop=NOW - 15 * 86400), REDRIVE, state(), ("g", "default"), NOW)
    blind = plan_rerun(spooled(execution_input=None), RESTART, None, ("g", "default"), NOW)
    assert late.skip is not None
    assert "use --restart" in late.skip
    assert not late.resolved
    assert blind.skip is not None
    assert "input is not available" in blind.skip
    assert not blind.resolved


def test_the_group_is_the_option_else_the_recorded_one_else_its_own() -> None:
    """--group wins; then the state table's record; else a group named after the execution."""
    assert choose_group(ARN, "customer-7", "manual") == ("manual", "option")
    assert choose_group(ARN, "customer-7", None) == ("customer-7", "recorded")
    assert choose_group(ARN, None, None) == (default_group(ARN), "default")
    assert choose_group(ARN, "bad group", None)[1] == "default"


# -- dead letters ---------------------------------------------------------------------


def dead_letter(reason: str | None, name: str | None = None, dedup: str = "source-id") -> Held:
    """A dead letter with ``reason`` (and its execution ``name``)."""
    attributes: dict[str, dict[str, str]] = {"Tenant": {"DataType": "String", "StringValue": "t-1"}}
    if reason is not None:
        attributes["DispatchError"] = {"DataType": "String", "StringValue": reason}
    if name is not None:
        attributes["ExecutionName"] = {"DataType": "String", "StringValue": name}
    return Held(
        message_id="dlq-id",
        receipt_handle="r",
        body="not json",
        hidden_until=NOW,
        attributes=attributes,
        system={"MessageGroupId": "g-1", "MessageDeduplicationId": dedup, "SentTimestamp": "1000"},
    )


def test_a_dead_letter_moves_back_without_its_dispatch_error_under_its_source_id() -> None:
    """Same body, group and attributes; DispatchError gone; the source message's id as dedup id and name."""
    move = plan_move(dead_letter("input is not valid JSON"))
    assert move.group == "g-1"
    assert move.deduplication_id == "source-id"
    assert move.attributes == {
        "Tenant": {"DataType": "String", "StringValue": "t-1"},
        "ExecutionName": {"DataType": "String", "StringValue": "source-id"},
    }
    assert move.as_json()["reason"] == "input is not valid JSON"


def test_a_named_dead_letter_keeps_its_name_and_one_sqs_moved_keeps_its_id() -> None:
    """An ExecutionName stays as it was; a message SQS moved (no DispatchError) keeps its MessageId."""
    named = plan_move(dead_letter("name collision", name="order-9"))
    by_sqs = plan_move(dead_letter(None, dedup="producer-dedup"))
    assert named.attributes["ExecutionName"]["StringValue"] == "order-9"
    assert by_sqs.deduplication_id == "dlq-id"
    assert reasons([named, by_sqs, named]) == {"name collision": 2, "(moved by SQS: maxReceiveCount)": 1}


def test_pace_spaces_actions_at_the_rate() -> None:
    """N actions at R per second take (N - 1) / R seconds; no rate, no waiting."""
    clock = {"now": 0.0}
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock["now"] += seconds

    pace = Pace(4.0, clock=lambda: clock["now"], sleep=sleep)
    for _ in range(5):
        pace.wait()
    assert clock["now"] == pytest.approx(1.0)
    unpaced = Pace(None, clock=lambda: 0.0, sleep=sleep)
    unpaced.wait()
    unpaced.wait()
    assert len(slept) == 4


def test_a_restart_reads_the_input_the_event_left_out() -> None:
    """Above 248 KiB the event carries no input: DescribeExecution's is used."""
    rerun = plan_rerun(spooled(execution_input=None), RESTART, state(), ("g", "recorded"), NOW)
    assert rerun.job is not None
    assert rerun.job.body == '{"order": 1}'


def test_the_state_machine_of_an_execution_arn() -> None:
    """A failure names its state machine through its execution ARN (no configuration needed)."""
    assert state_machine_of(ARN) == "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"


def test_the_sample_failure_event_reads_as_a_spooled_failure() -> None:
    """events/execution-failed.json is a spool message body as EventBridge delivers it."""
    body = (Path(__file__).parents[2] / "events" / "execution-failed.json").read_text()
    failure = parse_failure(body)
    assert failure is not None
    assert (failure.name, failure.status, failure.error, failure.input) == (
        "order-7",
        "FAILED",
        "DownstreamUnavailable",
        '{"order": 7}',
    )


@pytest.mark.parametrize(
    ("recorded", "lanes", "chosen", "expected"),
    [
        ("urgent", ["default", "urgent"], None, "urgent"),
        (None, ["glue"], None, "glue"),
        ("gone", ["glue"], None, "glue"),
        ("urgent", ["default", "urgent"], "urgent", "urgent"),
        (None, ["default", "urgent"], "urgent", "urgent"),
    ],
    ids=["recorded", "only-lane", "recorded-lane-gone", "chosen-is-origin", "unknown-goes-to-chosen"],
)
def test_a_rerun_goes_back_to_the_lane_it_came_from(
    recorded: str | None, lanes: list[str], chosen: str | None, expected: str
) -> None:
    """The recorded lane while it starts the machine, else its only lane; --lane takes the unknown."""
    assert destination(recorded, lanes, chosen) == Destination(expected)


def test_a_rerun_whose_lane_cannot_be_known_is_never_guessed() -> None:
    """Several lanes of one state machine and no record: no lane, a reason naming them, until --lane says."""
    where = destination(None, ["default", "urgent"])
    assert where is not None
    assert where.lane is None
    assert "default, urgent" in str(where.unknown)
    assert "--lane NAME" in str(where.unknown)
    nowhere = destination(None, [])
    assert nowhere == Destination(None, "no configured lane starts its state machine")


def test_with_a_lane_chosen_another_lanes_failures_are_left_alone() -> None:
    """--lane NAME takes NAME's failures only: not another lane's, nor a state machine NAME doesn't start."""
    assert destination("default", ["default", "urgent"], "urgent") is None
    assert destination(None, ["glue"], "urgent") is None
    assert destination(None, [], "urgent") is None
