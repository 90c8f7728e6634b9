"""Gates through the real handler and boto3 against moto, which really runs the gated workflow.

moto runs ``sqs:sendMessage.waitForTaskToken`` and `SendTaskSuccess`: each execution sends
its request to the gate's queue and waits; the dispatcher admits it; its section (a Wait)
runs; it sends its release to the stack's end-event queue, which the test hands to the
handler as the event source mapping would. Where moto differs from AWS (it accepts a used
token again while the execution runs), the test makes `SendTaskSuccess` answer as AWS does.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

import pytest

from dispatcher.adapters.gate_roster import RosterTable
from dispatcher.adapters.lease import LEASE_SORT_KEY
from dispatcher.core.executions import execution_arn
from dispatcher.core.gates import GateEntry
from dispatcher.core.kinds.gate import Gate
from dispatcher.local.events import event_from_description, sqs_event
from dispatcher.local.gates import create_gate
from dispatcher.local.stack import create_lane, read_all
from tests.support.crashes import Crash
from tests.support.gated import GATE, LONG_SECONDS, Gated, gate_on, release_times, wait_until
from tests.support.moto_harness import Harness


@pytest.fixture
def gated(executing_harness: Harness) -> Gated:
    """A gate on a sample gated workflow (no free part, a section of 1 s), in pool default."""
    return gate_on(executing_harness)


def test_a_real_gated_workflow_runs_through_the_gate_with_at_most_max_inside(gated: Gated) -> None:
    """Five executions wait at a gate of MAX 2; each is admitted once, at most two at a time, all succeed."""
    harness = gated.harness
    names = [f"e{index}" for index in range(5)]
    for name in names:
        gated.start(name)
    gated.wait_for_requests(5)
    inside_seen: list[int] = []
    released_at: list[float] = []
    deadline = time.monotonic() + 60
    while any(gated.status(name) == "RUNNING" for name in names):
        assert time.monotonic() < deadline, "the gated executions did not all finish"
        releases = gated.releases()
        if releases is not None:
            released_at += release_times(releases)
        report = harness.tick(releases)
        inside_seen.append(report["gates"][GATE]["inside"])
        time.sleep(0.2)
    assert [gated.status(name) for name in names] == ["SUCCEEDED"] * 5
    assert len(gated.admissions) == 5
    assert len({token for _, token in gated.admissions}) == 5
    assert max(inside_seen) <= 2
    # Each admission came when fewer than MAX of those admitted before it had sent their release.
    for index, (moment, _) in enumerate(sorted(gated.admissions)):
        assert index - sum(sent <= moment for sent in released_at) < 2
    assert gated.waiting() == 0


def test_a_release_frees_the_place_at_once_and_the_same_invocation_admits_the_next(gated: Gated) -> None:
    """With MAX 1 and two waiting, the invocation that brings the first's release admits the second."""
    harness = gated.harness
    gated.configure(1)
    gated.start("first")
    gated.start("second")
    gated.wait_for_requests(2)
    report = harness.tick()
    assert (report["admitted"], report["gates"][GATE]["inside"]) == (1, 0)
    gated.wait_for_releases(1)
    released = harness.tick(gated.releases())
    assert released["admitted"] == 1
    assert released["gates"][GATE]["inside"] == 0  # counted after the release, before the admission
    assert len(gated.admissions) == 2


def test_the_sample_gated_workflow_wakes_the_dispatcher_just_before_its_request(
    gated: Gated, caplog: pytest.LogCaptureFixture
) -> None:
    """Its wake, sent before the request, is one tick that admits it (DESIGN.md "Start on arrival")."""
    harness = gated.harness
    gated.start("woken")
    gated.wait_for_requests(1)
    [request] = harness.sqs.receive_message(
        QueueUrl=gated.entry["queue_url"], VisibilityTimeout=0, AttributeNames=["SentTimestamp"]
    )["Messages"]
    event = gated.releases()
    assert event is not None
    [wake] = event["Records"]
    assert json.loads(wake["body"]) == {"wake": GATE}
    assert int(wake["attributes"]["SentTimestamp"]) <= int(request["Attributes"]["SentTimestamp"])
    with caplog.at_level(logging.INFO, logger="dispatcher"):
        assert harness.tick(event)["admitted"] == 1
    [woken] = [record for record in caplog.records if record.getMessage().startswith("woken")]
    assert (woken.wakes, woken.members) == (1, [GATE])  # type: ignore[attr-defined]
    assert not [record for record in caplog.records if record.getMessage().startswith("skipped")]


def test_a_request_for_an_execution_inside_is_deleted_and_counts_once(gated: Gated) -> None:
    """A request delivered again is not admitted again: its admission is confirmed, so no second call."""
    harness = gated.harness
    gated.configure(2)
    gated.start("only")
    gated.wait_for_requests(1)
    [request] = harness.sqs.receive_message(QueueUrl=gated.entry["queue_url"], VisibilityTimeout=0)[
        "Messages"
    ]
    assert harness.tick()["admitted"] == 1
    for dedup in ("again-1", "again-2"):
        harness.sqs.send_message(
            QueueUrl=gated.entry["queue_url"],
            MessageBody=request["Body"],
            MessageGroupId="doubled",
            MessageDeduplicationId=dedup,
        )
        # Warm, the container knows the token; cold, the confirmation in the state table says so.
        report = harness.tick(cold=dedup == "again-2")
        assert (report["admitted"], report["already_inside"], report["refused"]) == (0, 1, 0)
        assert report["gates"][GATE]["inside"] == 1
    assert len(gated.admissions) == 1
    assert gated.waiting() == 0


def test_a_refused_token_never_admitted_is_dropped_and_holds_no_place(gated: Gated) -> None:
    """A request whose task is closed (the execution timed out waiting): deleted, counted, no place held."""
    harness = gated.harness
    gated.configure(1)
    gated.start("late")
    gated.wait_for_requests(1)
    harness.fail("states.SendTaskSuccess", "TaskTimedOut", "Provided task does not exist anymore")
    report = harness.tick()
    assert (report["admitted"], report["refused"], report["gates"][GATE]["inside"]) == (0, 1, 0)
    assert gated.waiting() == 0
    harness.clear_hooks()
    gated.start("next")
    gated.wait_for_requests(1)
    assert harness.tick()["admitted"] == 1  # the refused one's place was never taken


def test_a_crash_between_the_record_and_send_task_success_admits_once_on_redelivery(gated: Gated) -> None:
    """The request comes back, its admission is recorded already: it is admitted then, once, and runs on."""
    harness = gated.harness
    gated.configure(1)
    gated.start("crashed")
    gated.wait_for_requests(1)

    received: list[str] = []

    def note(parsed: dict[str, Any], **_: Any) -> None:
        received.extend(message["ReceiptHandle"] for message in parsed.get("Messages", []))

    died: list[str] = []

    def die(model: Any, **_: Any) -> None:
        # The process dies at its first SendTaskSuccess: no call of that invocation goes out after it.
        if died or model.name == "SendTaskSuccess":
            died.append(model.name)
            raise Crash("before SendTaskSuccess")

    harness.on("after-call.sqs.ReceiveMessage", note)
    harness.on("before-call", die)
    with pytest.raises(Crash):
        harness.tick()
    harness.clear_hooks()
    gated.admissions.clear()  # the dead invocation's call, never sent
    # The dead invocation's time is up: its lease is over (it lasts until the invocation's deadline).
    harness.dynamodb.delete_item(
        TableName=harness.stack.state_table,
        Key={"pk": {"S": f"lease#{harness.stack.state_machine_arn}"}, "sk": {"S": LEASE_SORT_KEY}},
    )
    gated.record_admissions()
    assert harness.queue_counts(gated.entry["queue_url"]) == (0, 1)
    # Its place is held while the request is in flight: a second execution waits.
    gated.start("second")
    gated.wait_for_requests(2)
    assert harness.tick()["admitted"] == 0
    # The crashed invocation's visibility timeout ends: the request comes back.
    for handle in received:
        harness.sqs.change_message_visibility(
            QueueUrl=gated.entry["queue_url"], ReceiptHandle=handle, VisibilityTimeout=0
        )
    # No place is free (its admission holds the only one), yet its request is found and admitted.
    report = harness.tick()
    assert (report["admitted"], report["gates"][GATE]["inside"]) == (1, 1)
    assert len(gated.admissions) == 1
    wait_until(lambda: gated.status("crashed") == "SUCCEEDED", "the crashed tick's execution to run on")


def test_a_poison_request_is_dead_lettered_with_a_reason(gated: Gated) -> None:
    """A body without both strings, or naming another state machine's execution, goes to the gate's DLQ."""
    harness = gated.harness
    other = execution_arn(harness.stack.state_machine_arn, "someone-else")
    bodies = ['{"token": "t"}', "not json", json.dumps({"token": "t", "execution": other})]
    for body in bodies:
        harness.sqs.send_message(
            QueueUrl=gated.entry["queue_url"],
            MessageBody=body,
            MessageGroupId="g",
            MessageDeduplicationId=uuid.uuid4().hex,
        )
    report = harness.tick()
    assert (report["dead_lettered"], report["admitted"]) == (3, 0)
    reasons = [
        message["MessageAttributes"]["DispatchError"]["StringValue"]
        for message in read_all(gated.entry["dead_letter_queue_url"])
    ]
    assert 'needs the strings "token"' in reasons[0] or "must be a JSON object" in reasons[0]
    assert "must be JSON" in reasons[1]
    assert "is not one of the gate's state machine" in reasons[2]


def test_a_gate_and_a_lane_in_one_pool_share_its_max(gated: Gated) -> None:
    """Pool default of MAX 2, jobs queued and executions waiting: one start and one admission, then none.

    The lane's executions and the gate's sections last minutes, so nothing leaves between
    the two ticks however slowly they follow each other (a busy machine).
    """
    harness = gated.harness
    stack = harness.stack.name
    lane = create_lane(stack, "slow", wait_seconds=LONG_SECONDS)
    gate = create_gate(
        stack, "held", release_queue_url=gated.release_queue_url, free_seconds=0, section_seconds=LONG_SECONDS
    )
    held = Gated(harness, gate, gated.release_queue_url)
    gated.gates.add("held")
    harness.configure(2, lanes=json.dumps({"lanes": [lane], "gates": [gate]}))
    for job in range(3):
        harness.sqs.send_message(
            QueueUrl=lane["queue_url"],
            MessageBody=json.dumps({"job": job}),
            MessageGroupId=f"g{job}",
            MessageDeduplicationId=uuid.uuid4().hex,
        )
    for name in ("w1", "w2", "w3"):
        held.start(name)
    held.wait_for_requests(3)
    report = harness.tick()
    assert (report["started"], report["admitted"]) == (1, 1)
    assert report["pools"]["default"]["running"] == 0
    full = harness.tick()
    assert (full["started"], full["admitted"], full["pools"]["default"]["running"]) == (0, 0, 2)


def test_a_release_sent_before_the_admission_frees_nothing_and_one_after_frees_the_place(
    gated: Gated,
) -> None:
    """A late release of an earlier entry (sent before this admission) can't free this one's place."""
    harness = gated.harness
    gated.configure(1)
    gated.start("inside")
    gated.start("waiting")
    gated.wait_for_requests(2)
    before = time.time() - 5
    assert harness.tick()["admitted"] == 1
    [admitted] = [name for name in ("inside", "waiting") if _admitted(gated, name)]
    body = json.dumps({"release": execution_arn(gated.machine, admitted), "gate": GATE})
    early = harness.tick(sqs_event([body], sent_at=before))
    assert (early["admitted"], early["gates"][GATE]["inside"]) == (0, 1)
    late = harness.tick(sqs_event([body], sent_at=time.time()))
    assert (late["admitted"], late["gates"][GATE]["inside"]) == (1, 0)


def _admitted(gated: Gated, name: str) -> bool:
    history = gated.harness.sfn.get_execution_history(executionArn=execution_arn(gated.machine, name))
    return any(  # the request's task (the wake before it is a task that succeeds too)
        event["type"] == "TaskSucceeded"
        and event["taskSucceededEventDetails"]["resource"] == "sendMessage.waitForTaskToken"
        for event in history["events"]
    )


def test_releases_of_unknown_gates_or_other_machines_are_skipped_and_never_fail_the_batch(
    gated: Gated,
) -> None:
    """A release naming no gate, another machine's execution, or malformed: logged and skipped."""
    harness = gated.harness
    gated.configure(1)
    gated.start("inside")
    gated.wait_for_requests(1)
    assert harness.tick()["admitted"] == 1
    bodies = [
        json.dumps({"release": execution_arn(gated.machine, "inside"), "gate": "nope"}),
        json.dumps({"release": execution_arn(harness.stack.state_machine_arn, "inside"), "gate": GATE}),
        json.dumps({"release": "inside", "gate": GATE}),
    ]
    report = harness.tick(sqs_event(bodies))
    assert report["gates"][GATE]["inside"] == 1


def test_an_execution_that_ends_inside_leaves_on_its_status_change_event(executing_harness: Harness) -> None:
    """Stopped inside the section: its event frees the place at once, and the next is admitted.

    The section outlasts the test: the stop must find the execution inside however slowly
    the steps before it run (with a section of 1 s, a busy machine let it finish first).
    """
    gated = gate_on(executing_harness, section_seconds=LONG_SECONDS)
    harness = gated.harness
    gated.configure(1)
    gated.start("first")
    gated.wait_for_requests(1)
    assert harness.tick()["admitted"] == 1
    gated.start("second")
    gated.wait_for_requests(1)
    harness.sfn.stop_execution(executionArn=execution_arn(gated.machine, "first"))
    wait_until(lambda: gated.status("first") == "ABORTED", "the stopped execution to be ABORTED")
    event = event_from_description(
        harness.sfn.describe_execution(executionArn=execution_arn(gated.machine, "first"))
    )
    report = harness.tick(event)
    assert (report["admitted"], report["gates"][GATE]["inside"]) == (1, 0)
    assert _admitted(gated, "second")


def test_a_release_sent_at_the_very_moment_of_the_admission_frees_nothing(harness: Harness) -> None:
    """Sent the moment its admission was recorded, a release can't be this entry's: it frees no place.

    An entry's own release comes after its `SendTaskSuccess`, so after its record; one that
    shares the record's moment is an earlier entry's (soak seed 900786: the stray release of
    a request admitted in the same virtual instant freed the place, and a third execution
    entered a gate of MAX 2).
    """
    gate = Gate(name=GATE, pool="default", queue_url="q", dead_letter_queue_url="d", state_machine_arn="arn")
    roster = RosterTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    recorded_at = 1_800_000_141.0
    entry = GateEntry(member=GATE, name="inside", recorded_at=recorded_at, state_machine_arn="arn", token="t")
    roster.enter([entry])
    assert roster.release(gate, "inside", recorded_at) is False
    assert [each.name for each in roster.read(gate).entries] == ["inside"]
    assert roster.release(gate, "inside", recorded_at + 0.001) is True
    assert list(roster.read(gate).entries) == []
