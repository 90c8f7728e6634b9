"""A gate's rounds through the real handler against moto: pauses, admissions' calls, a group's limit."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from dispatcher.adapters.item_keys import INSIDE_KIND
from dispatcher.core.executions import execution_arn
from dispatcher.local.events import event_from_description
from dispatcher.local.gates import create_gate, create_release_queue
from dispatcher.local.server import patient_task_tokens
from tests.support.gated import GATE, LONG_SECONDS, SETTLE_SECONDS, Gated, gate_on, wait_until
from tests.support.moto_harness import Harness


@pytest.fixture
def gated(executing_harness: Harness) -> Gated:
    """A gate on a sample gated workflow (no free part, a section of 1 s), in pool default."""
    return gate_on(executing_harness)


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


def test_a_refused_head_of_a_group_at_its_limit_leaves_its_place_to_the_next_request_in_the_tick(
    executing_harness: Harness,
) -> None:
    """One per group: the head's token is refused (it died waiting), so its group's next request enters now.

    Not held for the next tick: a refused request holds no place (soak seed 900141, where each
    dead request at a group's head cost the group a whole tick).
    """
    harness = executing_harness
    entry = create_gate(
        harness.stack.name,
        "tenants",
        release_queue_url=create_release_queue(harness.stack.name),
        free_seconds=0,
        section_seconds=LONG_SECONDS,
        group_path="$.tenant",
    )
    gate = Gated(harness, entry, "", gates={"tenants"})
    harness.configure(5, lanes=json.dumps({"gates": [{**entry, "max_per_group": 1}]}))
    for count, name in enumerate(("dead", "live"), start=1):
        harness.sfn.start_execution(
            stateMachineArn=gate.machine, name=name, input=json.dumps({"tenant": "t"})
        )
        gate.wait_for_requests(count)
    calls = {"count": 0}

    def refuse_the_first(**_: Any) -> None:
        calls["count"] += 1
        if calls["count"] == 1:
            error: Any = {"Error": {"Code": "TaskTimedOut", "Message": "Provided task does not exist"}}
            raise ClientError(error, "SendTaskSuccess")

    harness.on("before-call.states.SendTaskSuccess", refuse_the_first)

    report = harness.tick()

    assert (report["refused"], report["admitted"], report["tenants"]["held"]) == (1, 1, 0)
    wait_until(lambda: gate.status("live") == "RUNNING" and gate.waiting() == 0, "live admitted")
    for name in ("dead", "live"):
        harness.sfn.stop_execution(executionArn=execution_arn(gate.machine, name))
