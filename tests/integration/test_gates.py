"""Gates through the real handler and boto3 against moto, which really runs the gated workflow.

moto runs ``sqs:sendMessage.waitForTaskToken`` and `SendTaskSuccess`: each execution sends
its request to the gate's queue and waits; the dispatcher admits it; its section (a Wait)
runs; it sends its release to the stack's end-event queue, which the test hands to the
handler as the event source mapping would. Where moto differs from AWS (it accepts a used
token again while the execution runs), the test makes `SendTaskSuccess` answer as AWS does.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from dispatcher.adapters.item_keys import INSIDE_KIND
from dispatcher.adapters.lease import LEASE_SORT_KEY
from dispatcher.core.executions import execution_arn
from dispatcher.local.events import event_from_description, sqs_event
from dispatcher.local.gates import create_gate, create_release_queue
from dispatcher.local.server import patient_task_tokens
from dispatcher.local.stack import create_lane, read_all
from tests.integration.conftest import Harness
from tests.support.crashes import Crash

GATE = "crawl"
SETTLE_SECONDS = 20.0
LONG_SECONDS = 300
"""A Wait that outlasts a test: what holds a place keeps it."""


@dataclass
class Gated:
    """One gate of the harness's stack, its gated workflow, and what the test saw of it."""

    harness: Harness
    entry: dict[str, Any]
    release_queue_url: str
    admissions: list[tuple[float, str]] = field(default_factory=list)
    """(when, execution ARN) of every `SendTaskSuccess` the dispatcher made, accepted or not."""
    gates: set[str] = field(default_factory=lambda: {GATE})
    """The gates an admission may name (a test may configure one more)."""

    @property
    def machine(self) -> str:
        """The gated workflow's state machine."""
        return str(self.entry["state_machine_arn"])

    def configure(self, max_concurrency: int, **gate: Any) -> None:
        """The function's environment with this gate in ``LANES`` (``gate``: its options)."""
        self.harness.configure(max_concurrency, lanes=json.dumps({"gates": [{**self.entry, **gate}]}))

    def start(self, name: str) -> str:
        """Start a gated execution (as its own producer does, not through the dispatcher)."""
        return str(
            self.harness.sfn.start_execution(stateMachineArn=self.machine, name=name, input="{}")[
                "executionArn"
            ]
        )

    def status(self, name: str) -> str:
        """What `DescribeExecution` says of one gated execution."""
        return str(
            self.harness.sfn.describe_execution(executionArn=execution_arn(self.machine, name))["status"]
        )

    def waiting(self) -> int:
        """Requests on the gate's queue (visible or in flight)."""
        return sum(self.harness.queue_counts(self.entry["queue_url"]))

    def wait_for_requests(self, count: int) -> None:
        """Until ``count`` executions sent their request (moto runs them on threads of its own)."""
        wait_until(lambda: self.waiting() >= count, f"{count} request(s) on the gate's queue")

    def releases(self) -> dict[str, Any] | None:
        """The release messages sent so far, as the event source mapping delivers them (None: none)."""
        messages = self.harness.sqs.receive_message(
            QueueUrl=self.release_queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        for message in messages:
            self.harness.sqs.delete_message(
                QueueUrl=self.release_queue_url, ReceiptHandle=message["ReceiptHandle"]
            )
        if not messages:
            return None
        event = sqs_event([message["Body"] for message in messages])
        for record, message in zip(event["Records"], messages, strict=True):
            record["attributes"]["SentTimestamp"] = message["Attributes"]["SentTimestamp"]
        return event

    def record_admissions(self) -> None:
        """Note each `SendTaskSuccess` the handler's clients make, checking its output on the way."""

        def hook(params: dict[str, Any], **_: Any) -> None:
            output = json.loads(params["output"])
            assert output["gate"] in self.gates
            assert output["admitted_at"].endswith("Z")
            self.admissions.append((time.time(), params["taskToken"]))

        self.harness.on("provide-client-params.states.SendTaskSuccess", hook)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = SETTLE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.05)


@pytest.fixture
def gated(executing_harness: Harness) -> Gated:
    """A gate on a sample gated workflow (no free part, a section of 1 s), in pool default."""
    release_url = create_release_queue(executing_harness.stack.name)
    entry = create_gate(
        executing_harness.stack.name,
        GATE,
        release_queue_url=release_url,
        free_seconds=0,
        section_seconds=1,
    )
    gate = Gated(executing_harness, entry, release_url)
    gate.configure(2)
    gate.record_admissions()
    return gate


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
            released_at += [
                int(record["attributes"]["SentTimestamp"]) / 1000 for record in releases["Records"]
            ]
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
    wait_until(lambda: harness.queue_counts(gated.release_queue_url)[0] > 0, "the first release")
    released = harness.tick(gated.releases())
    assert released["admitted"] == 1
    assert released["gates"][GATE]["inside"] == 0  # counted after the release, before the admission
    assert len(gated.admissions) == 2


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
    return any(event["type"] == "TaskSucceeded" for event in history["events"])


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


def test_an_execution_that_ends_inside_leaves_on_its_status_change_event(gated: Gated) -> None:
    """Stopped inside the section: its event frees the place at once, and the next is admitted."""
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


def test_a_paused_gate_admits_nothing_and_its_executions_wait(gated: Gated) -> None:
    """``gates.<name>.paused`` in the control parameter: nothing is received from its queue."""
    harness = gated.harness
    gated.configure(2)
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter,
        Value=json.dumps({"gates": {GATE: {"paused": True}}}),
        Type="String",
        Overwrite=True,
    )
    gated.start("waits")
    gated.wait_for_requests(1)
    assert harness.tick()["admitted"] == 0
    assert harness.queue_counts(gated.entry["queue_url"]) == (1, 0)
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter,
        Value=json.dumps({"gates": {GATE: {"max_concurrency": 1}}}),
        Type="String",
        Overwrite=True,
    )
    assert harness.tick()["admitted"] == 1


def test_moto_send_task_success_is_tried_again_while_a_new_execution_sets_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The emulator's fix of moto's race: tripping on an execution not set up yet, the call goes again."""
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend  # noqa: PLC0415

    calls: list[str] = []

    def racing(_backend: object, token: str, _outcome: str) -> str:
        calls.append(token)
        if len(calls) < 3:
            raise AttributeError("'NoneType' object has no attribute 'callback_pool_manager'")
        return "sent"

    monkeypatch.setattr(StepFunctionsParserBackend, "send_task_success", racing)
    patient_task_tokens()
    assert StepFunctionsParserBackend.send_task_success(object(), "token", "{}") == "sent"  # type: ignore[arg-type]
    assert calls == ["token"] * 3


def test_a_rounds_admissions_are_recorded_25_a_call_with_the_calls_made_at_once(gated: Gated) -> None:
    """Thirty requests: two `BatchWriteItem` calls of admissions (25 and 5), each in flight with the other."""
    harness = gated.harness
    document = {"pools": {"own": {"max_concurrency": 40}}, "gates": [{**gated.entry, "pool": "own"}]}
    harness.configure(1, lanes=json.dumps(document))  # the gate's round is all its own
    for index in range(30):
        gated.start(f"e{index}")
    gated.wait_for_requests(30)
    together = threading.Barrier(2, timeout=SETTLE_SECONDS)
    sizes: list[int] = []

    def meet(params: dict[str, Any], **_: Any) -> None:
        items = [request["PutRequest"]["Item"] for request in next(iter(params["RequestItems"].values()))]
        if all(item.get("kind", {}).get("S") == INSIDE_KIND for item in items):
            sizes.append(len(items))
            together.wait()

    harness.on("provide-client-params.dynamodb.BatchWriteItem", meet)
    assert harness.tick()["admitted"] == 30
    assert sorted(sizes) == [5, 25]


def test_an_admissions_call_that_fails_leaves_its_requests_and_the_other_calls_admit(gated: Gated) -> None:
    """One of the two record calls fails after retries: its admissions wait for the next tick; none twice."""
    harness = gated.harness
    document = {"pools": {"own": {"max_concurrency": 40}}, "gates": [{**gated.entry, "pool": "own"}]}
    harness.configure(1, lanes=json.dumps(document))
    for index in range(30):
        gated.start(f"e{index}")
    gated.wait_for_requests(30)
    harness.fail("dynamodb.BatchWriteItem", "ProvisionedThroughputExceededException", after=1)
    first = harness.tick()
    assert first["admitted"] in {5, 25}
    assert gated.waiting() == 30 - first["admitted"]
    harness.clear_hooks()
    gated.record_admissions()
    assert harness.tick()["admitted"] == 30 - first["admitted"]
    tokens = [token for _, token in gated.admissions]
    assert (len(tokens), len(set(tokens))) == (30, 30)
    assert gated.waiting() == 0


def test_a_gate_admits_at_most_max_per_group_of_one_tenant_and_the_next_when_one_leaves(
    executing_harness: Harness,
) -> None:
    """Gate MAX 5, one per group: the noisy tenant's second request is held while the quiet one enters."""
    harness = executing_harness
    release_url = create_release_queue(harness.stack.name)
    entry = create_gate(
        harness.stack.name,
        "tenants",
        release_queue_url=release_url,
        free_seconds=0,
        section_seconds=LONG_SECONDS,
        group_path="$.tenant",
    )
    gate = Gated(harness, entry, release_url, gates={"tenants"})
    harness.configure(5, lanes=json.dumps({"gates": [{**entry, "max_per_group": 1}]}))
    tenants = (("noisy-1", "noisy"), ("noisy-2", "noisy"), ("quiet-1", "quiet"))
    for count, (name, tenant) in enumerate(tenants, start=1):
        harness.sfn.start_execution(
            stateMachineArn=gate.machine, name=name, input=json.dumps({"tenant": tenant})
        )
        gate.wait_for_requests(count)  # one at a time: the noisy group's requests in this order

    first = harness.tick()

    assert (first["admitted"], first["gates"]["tenants"]["inside"]) == (2, 0)
    assert first["tenants"]["held"] == 1
    assert harness.tick()["admitted"] == 0
    harness.sfn.stop_execution(executionArn=execution_arn(gate.machine, "noisy-1"))
    ended = event_from_description(
        {
            **harness.sfn.describe_execution(executionArn=execution_arn(gate.machine, "noisy-1")),
            "status": "ABORTED",
        }
    )
    ended["detail"]["stopDate"] = int(time.time() * 1000)  # moto's stop lands on its own thread
    after = harness.tick(ended)
    assert after["admitted"] == 1
    wait_until(lambda: gate.status("noisy-2") == "RUNNING" and gate.waiting() == 0, "noisy-2 admitted")
    for name in ("noisy-2", "quiet-1"):
        harness.sfn.stop_execution(executionArn=execution_arn(gate.machine, name))
