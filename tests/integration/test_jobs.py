"""Jobs a producer follows, cancels and bounds, through the real handler and producer client on moto."""

from __future__ import annotations

import fnmatch
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from freezegun import freeze_time

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.core.jobs import start_by_text
from dispatcher.core.messages import DISPATCH_ERROR_ATTRIBUTE
from dispatcher.local.account import ACCOUNT_ID, REGION
from dispatcher.local.stack import create_lane
from dispatcher.producer import AlreadyStartedError, Producer
from tests.infra.template import deployed
from tests.support.clock import advance
from tests.support.moto_harness import Harness


def _producer(harness: Harness) -> Producer:
    """A producer in a process with the function's environment (it follows and cancels from it)."""
    return Producer(harness.stack.queue_url)


def _started(harness: Harness) -> set[str]:
    return {execution["name"] for execution in harness.executions()}


def test_a_cancelled_job_never_starts_and_its_group_goes_on_in_order(harness: Harness) -> None:
    """The cancelled job's message is deleted, not dead-lettered; the job after it in its group starts."""
    harness.configure(5)
    producer = _producer(harness)
    for name in ("a-1", "a-2", "a-3"):
        producer.send({"job": name}, group="a", name=name)
    assert producer.cancel("a-2", reason="upload deleted") == "cancelled"
    result = harness.tick()
    assert (result["started"], result["cancelled"], result["dead_lettered"]) == (2, 1, 0)
    assert _started(harness) == {"a-1", "a-3"}
    assert harness.queue_counts() == (0, 0)
    assert harness.dead_letters() == []
    report = producer.job("a-2").as_json()
    assert (report["state"], report["reason"]) == ("cancelled", "upload deleted")
    assert producer.job("a-1").state == "running"
    assert producer.job("never-sent").state == "not started"


def test_cancelling_twice_is_no_error_and_a_started_job_is_not_cancelled(harness: Harness) -> None:
    """A second cancel says cancelled again; a started one raises with its ARN, and ``stop`` stops it."""
    harness.configure(5)
    producer = _producer(harness)
    producer.send({}, group="g", name="late")
    producer.send({}, group="h", name="early")
    assert producer.cancel("late") == producer.cancel("late") == "cancelled"
    harness.tick()
    with pytest.raises(AlreadyStartedError, match="already started: early is RUNNING"):
        producer.cancel("early")
    sent: list[dict[str, Any]] = []
    harness.on("provide-client-params.states.StopExecution", lambda params, **_: sent.append(dict(params)))
    assert _producer(harness).cancel("early", reason="not wanted", stop=True) == "stopped"
    assert harness.sfn.describe_execution(executionArn=harness.arn_of("early"))["status"] == "ABORTED"
    # moto keeps no error or cause of a stop: what was asked of Step Functions is checked instead.
    assert [(request["error"], request["cause"]) for request in sent] == [
        ("dispatcher.Cancelled", "not wanted")
    ]
    report = producer.job("early").as_json()
    assert (report["state"], report["reason"]) == ("aborted", "not wanted")


def test_cancelling_a_group_drops_its_queued_jobs_but_not_later_ones_nor_other_groups(
    harness: Harness,
) -> None:
    """A tenant leaves: its jobs sent before the cancel never start; one sent after it does."""
    harness.configure(1)
    producer = _producer(harness)
    producer.send({}, group="other", name="other-1")
    for index in range(3):
        producer.send({}, group="tenant", name=f"tenant-{index}")
    harness.tick()  # MAX 1: other-1 starts, the tenant's jobs wait
    producer.cancel_group("tenant", reason="tenant left")
    producer.send({}, group="tenant", name="tenant-new")
    harness.configure(10)
    result = harness.tick()
    assert result["cancelled"] == 3
    assert _started(harness) == {"other-1", "tenant-new"}
    assert producer.job("tenant-1").as_json()["reason"] == "tenant left"


def test_a_job_received_after_its_start_by_is_dead_lettered_as_expired(harness: Harness) -> None:
    """``StartBy`` passed: the DLQ copy's reason begins ``expired:``, counted apart from poison."""
    harness.configure(5)
    producer = _producer(harness)
    past = datetime.now(UTC) - timedelta(seconds=5)
    # The producer client refuses a deadline that has passed; a producer of plain SQS calls may send one.
    harness.sqs.send_message(
        QueueUrl=harness.stack.queue_url,
        MessageBody="{}",
        MessageGroupId="g",
        MessageDeduplicationId="too-late",
        MessageAttributes={
            "ExecutionName": {"DataType": "String", "StringValue": "too-late"},
            "StartBy": {"DataType": "String", "StringValue": start_by_text(past)},
        },
    )
    producer.send({}, group="g", name="in-time", start_by=datetime.now(UTC) + timedelta(hours=1))
    result = harness.tick()
    assert (result["started"], result["expired"], result["dead_lettered"]) == (1, 1, 0)
    assert _started(harness) == {"in-time"}
    [letter] = harness.dead_letters()
    reason = letter["MessageAttributes"][DISPATCH_ERROR_ATTRIBUTE]["StringValue"]
    assert reason.startswith("expired: deadline ")
    assert "(StartBy) passed; received at " in reason
    report = producer.job("too-late").as_json()
    assert report["state"] == "expired"
    assert report["deadline"] == start_by_text(past)


def test_a_malformed_start_by_is_poison(harness: Harness) -> None:
    """A ``StartBy`` that is no moment with a UTC offset is dead-lettered with the reason, as poison."""
    harness.configure(5)
    harness.sqs.send_message(
        QueueUrl=harness.stack.queue_url,
        MessageBody="{}",
        MessageGroupId="g",
        MessageDeduplicationId="d",
        MessageAttributes={"StartBy": {"DataType": "String", "StringValue": "tomorrow"}},
    )
    result = harness.tick()
    assert (result["dead_lettered"], result["expired"]) == (1, 0)
    [letter] = harness.dead_letters()
    assert letter["MessageAttributes"][DISPATCH_ERROR_ATTRIBUTE]["StringValue"].startswith("invalid StartBy:")


def test_a_lanes_max_wait_expires_a_job_that_waited_longer(harness: Harness) -> None:
    """``MAX_WAIT_SECONDS`` 60: a job received 90 s after it was sent expires; a fresh one starts."""
    with freeze_time(datetime.now(UTC), tick=True) as frozen:
        harness.configure(5, max_wait_seconds=60)
        producer = _producer(harness)
        producer.send({}, group="old", name="waited")
        advance(frozen, 90)
        producer.send({}, group="new", name="fresh")
        result = harness.tick()
    assert (result["started"], result["expired"]) == (1, 1)
    assert _started(harness) == {"fresh"}
    reason = producer.job("waited").as_json()["reason"]
    assert "(max_wait_seconds) passed" in str(reason)
    assert "after waiting 1 min 30 s" in str(reason)


def test_a_cancel_during_a_round_is_true_whatever_the_round_does(harness: Harness) -> None:
    """Cancels that land while the round records and starts: each answer matches what happened.

    At the round's first `StartExecution`, another thread cancels every job of the round and
    one still queued. The tick in flight read no cancellation: the cancels wait for it to end,
    then say ``already started`` for what it started and ``cancelled`` for the rest, which
    never starts, tick after tick.
    """
    harness.configure(3)
    producer = _producer(harness)
    names = [f"job-{index}" for index in range(5)]
    for name in names:
        producer.send({}, group=name, name=name)
    answers: dict[str, str] = {}
    threads: list[threading.Thread] = []

    def cancel_all(**_: Any) -> None:
        if threads:
            return

        def cancel(name: str) -> None:
            try:
                answers[name] = _producer(harness).cancel(name)
            except AlreadyStartedError:
                answers[name] = "already started"

        threads.extend(threading.Thread(target=cancel, args=(name,)) for name in names)
        for thread in threads:
            thread.start()

    harness.on("before-call.states.StartExecution", cancel_all)
    harness.tick()
    for thread in threads:
        thread.join(timeout=60)
    harness.clear_hooks()
    harness.configure(10)
    for _ in range(3):
        harness.tick()
    started = _started(harness)
    assert answers == {name: "already started" if name in started else "cancelled" for name in names}
    assert len(started) == 3
    assert harness.queue_counts() == (0, 0)
    assert json.loads(json.dumps(producer.job(names[-1]).as_json()))["state"] == "cancelled"


def _follower_statements(harness: Harness) -> list[dict[str, Any]]:
    """`JobFollowerPolicy`'s statements as CloudFormation resolves them against this stack."""
    stack = harness.stack
    deploy = deployed(
        {"TargetStateMachineArn": stack.state_machine_arn},
        refs={"ControlParameter": stack.control_parameter},
        attributes={"StateTable": f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{stack.state_table}"},
    )
    policy = deploy.template["Resources"]["JobFollowerPolicy"]["Properties"]["PolicyDocument"]
    return [deploy(statement) for statement in policy["Statement"]]


def _arn_of_call(service: str, params: dict[str, Any]) -> str:
    """The resource ARN IAM authorises a follower's call on."""
    if service == "dynamodb":
        table = params.get("TableName") or next(iter(params["RequestItems"]))
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{table}"
    if service == "ssm":
        return f"arn:aws:ssm:{REGION}:{ACCOUNT_ID}:parameter{params['Name']}"
    return str(params["executionArn"])


def test_the_follower_policy_grants_every_call_of_following_and_cancelling_and_no_more(
    harness: Harness,
) -> None:
    """`job`, `cancel` (with ``stop``) and `cancel_group`: each call allowed, each action granted used."""
    harness.configure(1, control_parameter=harness.stack.control_parameter)
    harness.ssm.put_parameter(Name=harness.stack.control_parameter, Value="{}", Type="String", Overwrite=True)
    calls: list[tuple[str, str]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.signing_name
        calls.append((f"{service}:{model.name}", _arn_of_call(service, params)))

    armed = threading.Event()

    def start_meanwhile(**_: Any) -> None:
        # As a tick in flight would: it starts "raced" before it could read the cancellation.
        if armed.is_set():
            armed.clear()
            harness.start_directly("raced")

    sender = _producer(harness)
    sender.send({}, group="g", name="running-one")
    harness.tick()
    harness.on("provide-client-params", record)  # the clients built from now on: the follower's
    harness.on("before-call.dynamodb.UpdateItem", start_meanwhile)
    producer = _producer(harness)
    producer.job("never-sent")
    producer.job("running-one")
    producer.cancel("never-sent")
    armed.set()
    with pytest.raises(AlreadyStartedError):
        producer.cancel("raced")  # found started after its write: the write is taken back
    assert producer.job("raced").state == "running"
    producer.cancel("running-one", stop=True)
    producer.cancel_group("h")
    statements = _follower_statements(harness)
    followers = calls
    ungranted = [
        call
        for call in followers
        if not any(
            call[0] in statement["Action"]
            and any(fnmatch.fnmatchcase(call[1], pattern) for pattern in _listed(statement["Resource"]))
            for statement in statements
        )
    ]
    assert ungranted == []
    granted = {action for statement in statements for action in _listed(statement["Action"])}
    assert granted - {action for action, _ in followers} == set()


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def test_a_cancelled_job_of_a_lane_on_its_own_state_machine_holds_no_slot_after_its_tick(
    harness: Harness,
) -> None:
    """Lane tenants starts a state machine of its own: its cancelled jobs hold no slot after their tick.

    Issue 62's repro: their voids named other keys than their records (a lane whose state
    machine isn't the partition's), so each counted RUNNING until its review, 90 s, and the
    pool stalled while `status` said it was free.
    """
    lane = create_lane(harness.stack.name, "tenants", pool="tpool", max_per_group=1)
    harness.configure(5, lanes=json.dumps({"pools": {"tpool": {"max_concurrency": 3}}, "lanes": [lane]}))
    producer = Producer(lane["queue_url"])
    for name in ("big-1", "big-2", "big-3"):
        producer.send({"job": name}, group="big", name=name)
    producer.cancel_group("big", lane="tenants")

    first = harness.tick()
    second = harness.tick()

    assert (first["cancelled"], first["started"]) == (3, 0)
    assert second["pools"]["tpool"]["running"] == 0
    producer.send({"job": "big-4"}, group="big", name="big-4")
    assert harness.tick()["started"] == 1


def test_a_rounds_job_records_go_in_its_start_records_call_and_a_cancelled_job_is_never_recorded(
    harness: Harness,
) -> None:
    """One `BatchWriteItem` carries the round's start records and its expired and cancelled jobs' records.

    A job its group's cancellation took is screened before the round records its starts: no
    start record is written for it (nor voided after).
    """
    harness.configure(5)
    producer = _producer(harness)
    producer.send({}, group="g", name="in-time")
    harness.sqs.send_message(
        QueueUrl=harness.stack.queue_url,
        MessageBody="{}",
        MessageGroupId="e",
        MessageDeduplicationId="too-late",
        MessageAttributes={
            "ExecutionName": {"DataType": "String", "StringValue": "too-late"},
            "StartBy": {
                "DataType": "String",
                "StringValue": start_by_text(datetime.now(UTC) - timedelta(seconds=5)),
            },
        },
    )
    producer.send({}, group="h", name="left")
    producer.cancel_group("h")
    calls: list[dict[str, int]] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        items = [
            request["PutRequest"]["Item"] for request in params["RequestItems"][harness.stack.state_table]
        ]
        calls.append(
            {
                "starts": sum(item.get("kind", {}).get("S") == "starts" for item in items),
                "jobs": sum(item["pk"]["S"].startswith("jobs#") for item in items),
            }
        )

    harness.on("provide-client-params.dynamodb.BatchWriteItem", count)
    result = harness.tick()
    assert (result["started"], result["expired"], result["cancelled"]) == (1, 1, 1)
    assert [call for call in calls if call["jobs"]] == [{"starts": 1, "jobs": 2}], calls
    table = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    recorded = {start.name for start in table.window(time.time() - 60).recorded}
    assert recorded == {"in-time"}, "the cancelled job was never recorded"
    assert producer.job("left").state == "cancelled"
    assert producer.job("too-late").state == "expired"
