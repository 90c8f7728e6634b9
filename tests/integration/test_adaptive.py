"""An adaptive pool through the real handler and boto3 on moto: the cut, the cooldown, each signal once."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from moto import mock_aws

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.core.adaptive import LimitState
from dispatcher.local.command import lane_rules
from dispatcher.local.helpers import downstream
from dispatcher.local.stack import create_lane
from dispatcher.local.workflows import (
    DOWNSTREAM_ERROR,
    THROTTLED_ERROR,
    keepers,
    release_ended,
    set_downstream,
)
from tests.support.harness import lanes, running_of, send
from tests.support.moto_harness import Harness, make_harness

GLUE = "Glue.ConcurrentRunsExceededException"


def limit_of(harness: Harness, pool: str = "default") -> LimitState | None:
    """The pool's limit as the state table keeps it."""
    return StartLedgerTable(
        harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn
    ).limit(pool)


def adaptive(harness: Harness, max_concurrency: int, **settings: Any) -> None:
    """Configures pool default adaptive on the Glue throttle, with ``settings``."""
    lanes(harness, max_concurrency, {"pools": {"default": {"adaptive": {"errors": [GLUE], **settings}}}})


def end(harness: Harness, name: str, status: str = "SUCCEEDED", **detail: Any) -> dict[str, Any]:
    """Stop execution ``name`` and return the event EventBridge would deliver for its end."""
    harness.sfn.stop_execution(executionArn=harness.arn_of(name))
    return harness.status_change(name, status, **detail)


def started(harness: Harness) -> list[str]:
    """The names of the executions the dispatcher started."""
    return [str(call["name"]) for call in harness.starts.calls]


def test_a_throttle_signal_cuts_the_limit_and_nothing_starts_until_running_is_below_it(
    harness: Harness, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A throttle signal cuts L, and no start comes until RUNNING is below the new L."""
    adaptive(harness, 8)
    for index in range(20):
        harness.send(json.dumps({"job": index}), group=f"g{index}")
    assert harness.tick()["started"] == 8
    assert limit_of(harness) == LimitState(limit=8, changed_at=pytest.approx(time.time(), abs=60))  # type: ignore[arg-type]
    throttled = end(harness, started(harness)[0], "FAILED", error=GLUE)
    result = harness.tick(throttled)
    assert result["started"] == 0, "L = 4 and 7 still run: nothing starts"
    assert result["free"] == 0
    lines = capsys.readouterr().out.splitlines()
    documents = [json.loads(line) for line in lines if '"_aws"' in line]
    limits = [doc["PoolLimit"] for doc in documents if doc.get("Pool") == "default" and "PoolLimit" in doc]
    assert limits == [[8.0], [4.0]], "the first tick's, then the cut's"
    cut = next(
        record.__dict__
        for record in caplog.records
        if record.getMessage() == "throttled: the pool's limit is cut"
    )
    assert (cut["execution"], cut["error"], cut["limit_before"], cut["limit"]) == (
        started(harness)[0],
        GLUE,
        8,
        4,
    )
    kept = limit_of(harness)
    assert kept is not None
    assert kept.limit == 4
    # the same event, delivered again (and again in a warm container): no second cut
    assert harness.tick(throttled)["started"] == 0
    assert harness.tick(throttled, cold=False)["started"] == 0
    again = limit_of(harness)
    assert again is not None
    assert (again.limit, again.cut_by) == (4, kept.cut_by)
    # three more end cleanly: 4 run, L is 4, nothing starts
    for name in started(harness)[1:4]:
        assert harness.tick(end(harness, name))["started"] == 0
    assert harness.running() == 4
    # the fourth clean end since the cut: L grows to 5, and 3 run: two start
    assert harness.tick(end(harness, started(harness)[4]))["started"] == 2
    assert limit_of(harness).limit == 5  # type: ignore[union-attr]
    assert harness.running() == 5


def test_another_error_is_not_a_signal_and_a_signal_within_the_cooldown_is_ignored(harness: Harness) -> None:
    """Another error leaves L alone; of two throttles within the cooldown, one cuts."""
    adaptive(harness, 8, cooldown_seconds=3600)
    send(harness.stack.queue_url, [f"j{index}" for index in range(8)])
    harness.tick()
    names = started(harness)
    harness.tick(end(harness, names[0], "FAILED", error="States.TaskFailed"))
    assert limit_of(harness) is not None
    assert limit_of(harness).limit == 8  # type: ignore[union-attr]
    harness.tick(end(harness, names[1], "FAILED", error=GLUE))
    harness.tick(end(harness, names[2], "FAILED", error=GLUE))
    assert limit_of(harness).limit == 4  # type: ignore[union-attr]


@pytest.fixture
def calling_harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    """In-process moto running the sample workflow that calls the simulated downstream API."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield make_harness(monkeypatch, wait_seconds=2, downstream=True, slots=True)


def test_an_end_learned_by_describe_execution_is_a_signal_too(calling_harness: Harness) -> None:
    """No event: the tick finds the recorded start ended, and its error, with `DescribeExecution`."""
    harness = calling_harness
    lanes(
        harness,
        6,
        {"pools": {"default": {"adaptive": {"errors": [DOWNSTREAM_ERROR], "min": 2}}}},
    )
    set_downstream(harness.stack.downstream_table, up=False)
    send(harness.stack.queue_url, [f"j{index}" for index in range(10)])
    assert harness.tick()["started"] == 6
    deadline = time.monotonic() + 60
    while harness.running() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert harness.running() == 0
    assert {e["status"] for e in harness.executions()} == {"FAILED"}
    result = harness.tick()
    kept = limit_of(harness)
    assert kept is not None
    assert kept.limit == 3, "one cut: the other five signals fall in its cooldown"
    assert result["started"] == 3


def test_set_max_clamps_the_limit_and_adaptive_false_goes_back_to_max(harness: Harness) -> None:
    """A pool's set-max clamps L, and adaptive false plans with MAX and keeps MAX."""
    glue = create_lane(harness.stack.name, "glue", pool="glue")
    lanes(
        harness,
        0,
        {"pools": {"glue": {"max_concurrency": 10, "adaptive": {"errors": [GLUE]}}}, "lanes": [glue]},
    )
    send(glue["queue_url"], [f"g{index}" for index in range(20)])
    result = harness.tick()
    assert result["started"] == 10
    assert result["pools"]["glue"]["limit"] == 10
    first = harness.sfn.list_executions(stateMachineArn=glue["state_machine_arn"])["executions"][0]
    harness.sfn.stop_execution(executionArn=first["executionArn"])
    description = harness.sfn.describe_execution(executionArn=first["executionArn"])
    from dispatcher.local.events import event_from_description  # noqa: PLC0415

    event = event_from_description({**description, "status": "FAILED", "error": GLUE})
    assert harness.tick(event)["pools"]["glue"]["limit"] == 5
    assert running_of(harness, glue["state_machine_arn"]) == 9
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter,
        Value=json.dumps({"pools": {"glue": {"max_concurrency": 3}}}),
        Type="String",
        Overwrite=True,
    )
    assert harness.tick()["pools"]["glue"]["limit"] == 3
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter,
        Value=json.dumps({"pools": {"glue": {"adaptive": False}}}),
        Type="String",
        Overwrite=True,
    )
    result = harness.tick()
    assert "limit" not in result["pools"]["glue"]
    assert result["started"] == 1, "MAX 10 again: 9 run, one starts"
    kept = limit_of(harness, "glue")
    assert kept is not None
    assert kept.limit == 10, "turned off, the kept limit is MAX again"


def test_the_sample_workflow_throttles_above_the_downstreams_capacity_and_the_pool_learns_it(
    calling_harness: Harness,
) -> None:
    """`downstream capacity 2`: of 6 started at once, 4 fail with Downstream.Throttled; L is cut."""
    harness = calling_harness
    lanes(harness, 6, {"pools": {"default": {"adaptive": {"errors": [THROTTLED_ERROR]}}}})
    out = io.StringIO()
    assert downstream(["capacity", "2", "--stack", harness.stack.name], out=out) == 0
    assert out.getvalue() == (
        "downstream API capacity 2 at once (0 in use now);"
        " above it executions fail with Downstream.Throttled\n"
    )
    send(harness.stack.queue_url, [f"j{index}" for index in range(10)])
    assert harness.tick()["started"] == 6
    deadline = time.monotonic() + 60
    while harness.running() and time.monotonic() < deadline:
        time.sleep(0.2)
    errors = sorted(
        str(harness.sfn.describe_execution(executionArn=e["executionArn"]).get("error"))
        for e in harness.executions()
    )
    assert errors == [*[THROTTLED_ERROR] * 4, "None", "None"]
    harness.tick()
    kept = limit_of(harness)
    assert kept is not None
    assert kept.limit == 3
    with pytest.raises(SystemExit):
        downstream(["capacity", "0"])


def test_a_stopped_execution_gives_its_downstream_slot_back_on_its_end_or_at_the_next_capacity(
    calling_harness: Harness,
) -> None:
    """Stopped during its wait, an execution never runs its own release: its end gives the slot back.

    `dispatcher local`'s end rule does (`lane_rules`), and `downstream capacity` gives back
    what no end did. Two stopped executions made capacity 3 behave as 1 (issue 62, item 4).
    """
    harness = calling_harness
    table = harness.stack.downstream_table
    out = io.StringIO()
    downstream(["capacity", "3", "--stack", harness.stack.name], out=out)
    arns = [harness.start_directly(name) for name in ("held-1", "held-2", "held-3")]
    deadline = time.monotonic() + 60
    while len(keepers(table)) < len(arns) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert keepers(table) == sorted(arns)
    for arn in arns:
        harness.sfn.stop_execution(executionArn=arn)
    [_, session] = lane_rules(harness.stack, [harness.stack.state_machine_arn], "http://unused", None)
    session.deliver(harness.status_change("held-1", "ABORTED"))
    session.deliver(harness.status_change("held-1", "ABORTED"))  # delivered twice: given back once
    assert keepers(table) == sorted(arns[1:])
    downstream(["capacity", "3", "--stack", harness.stack.name], out=out)
    assert out.getvalue().splitlines()[-2:] == [
        "downstream API capacity 3 at once (0 in use now);"
        " above it executions fail with Downstream.Throttled",
        "gave back 2 slot(s) held by executions no longer running",
    ]
    assert release_ended(table, arns[1]) is False


def test_pools_at_minimum_counts_a_pool_once_its_limit_sat_at_min_for_15_minutes(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cut to its min, the pool isn't counted at once; kept there 15 minutes (the same pool), it is."""
    adaptive(harness, 4, min=2)
    for index in range(6):
        harness.send(json.dumps({"job": index}), group=f"g{index}")
    harness.tick()
    harness.tick(end(harness, started(harness)[0], "FAILED", error=GLUE))
    kept = limit_of(harness)
    assert kept is not None
    assert (kept.limit, kept.floor_since) == (2, pytest.approx(time.time(), abs=60))

    def at_minimum() -> list[float]:
        lines = capsys.readouterr().out.splitlines()
        documents = [json.loads(line) for line in lines if '"_aws"' in line]
        return [value for doc in documents if "PoolsAtMinimum" in doc for value in doc["PoolsAtMinimum"]]

    assert at_minimum()[-1] == 0.0, "at its min since just now"
    ledger = StartLedgerTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    assert ledger.record_limit("default", replace(kept, floor_since=time.time() - 901), kept, time.time())
    harness.tick()
    assert at_minimum() == [1.0]
