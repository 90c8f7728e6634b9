"""Configuration faults stop the tick loudly, name the problem, and leave every message where it was.

Unlike poison, a broken deployment is nobody's message's fault: the handler raises
(Lambda records an error, the ConfigurationErrors metric alarms), nothing is
dead-lettered, and once the deployment is fixed the backlog drains as if nothing
had happened.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from dispatcher.core.errors import ConfigurationError
from dispatcher.core.executions import execution_arn
from dispatcher.local.account import ACCOUNT_ID, REGION
from dispatcher.local.events import status_change_event
from dispatcher.local.workflows import sample_workflow
from tests.faults.ending import dead_letters, queue_counts
from tests.faults.jobs import Job
from tests.faults.run import ScenarioRun
from tests.faults.scenario import Scenario
from tests.support.faulty_aws import FaultyAws
from tests.support.plans import FaultPlan, Lag


def backlog() -> list[Job]:
    """Two valid jobs and one poison message, each in its own group."""
    return [
        Job("poison", "g0", "{not json", 0, poison="invalid json"),
        Job("one", "g1", json.dumps({"job": 1}), 0),
        Job("two", "g2", json.dumps({"job": 2}), 0),
    ]


def express_machine(run: ScenarioRun) -> dict[str, str]:
    """An EXPRESS state machine beside the scenario's stack, as a lane's document."""
    arn = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
        name=f"{run.stack.state_table}-express",
        definition=sample_workflow(1),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/express",
        type="EXPRESS",
    )["stateMachineArn"]
    return {"STATE_MACHINE_ARN": arn}


def standard_queue_lane(run: ScenarioRun) -> dict[str, str]:
    """A second lane whose queue is a standard one: FIFO order and deduplication would be lost."""
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName=f"{run.stack.state_table}-standard")["QueueUrl"]
    lane = {
        "name": "standard",
        "queue_url": queue,
        "dead_letter_queue_url": run.stack.dead_letter_queue_url,
        "state_machine_arn": run.stack.state_machine_arn,
    }
    return {"LANES": json.dumps({"lanes": [lane]})}


BROKEN_ENVIRONMENTS: dict[str, tuple[Callable[[ScenarioRun], dict[str, str]], str]] = {
    "missing state machine": (
        lambda run: {"STATE_MACHINE_ARN": run.stack.state_machine_arn + "-gone"},
        r"DescribeStateMachine\(.*-gone\) failed with StateMachineDoesNotExist",
    ),
    "EXPRESS state machine": (express_machine, "is EXPRESS: the dispatcher needs a STANDARD state machine"),
    "missing queue": (
        lambda run: {"QUEUE_URL": run.stack.queue_url.replace(".fifo", "-gone.fifo")},
        "ReceiveMessage failed with .*NonExistentQueue",
    ),
    "missing table": (
        lambda run: {"STATE_TABLE": "no-such-table"},
        "on state table no-such-table .*failed with ResourceNotFoundException",
    ),
    "malformed MAX_CONCURRENCY": (lambda run: {"MAX_CONCURRENCY": "ten"}, "MAX_CONCURRENCY"),
    "negative MAX_CONCURRENCY": (lambda run: {"MAX_CONCURRENCY": "-1"}, "MAX_CONCURRENCY"),
    "malformed state machine ARN": (lambda run: {"STATE_MACHINE_ARN": "jobs"}, "STATE_MACHINE_ARN"),
    "a lane's standard queue": (standard_queue_lane, r"LANES: lanes\[0\]\.queue_url: .* is not a FIFO queue"),
}


@pytest.mark.parametrize("broken", list(BROKEN_ENVIRONMENTS))
def test_broken_environment_stops_the_tick_and_keeps_every_message(
    broken: str, faulty_aws: FaultyAws
) -> None:
    """The error names what is wrong; all messages stay visible; fixed, the backlog drains."""
    run = ScenarioRun(Scenario.empty(3), faulty_aws)
    jobs = backlog()
    for job in jobs:
        run.send(job)
    breakage, expected = BROKEN_ENVIRONMENTS[broken]
    overrides = breakage(run)
    with pytest.raises(ConfigurationError, match=expected):
        run.tick(**overrides)
    assert queue_counts(run) == (3, 0)
    assert dead_letters(run) == {}
    assert run.world.executions == {}
    assert run.tick()["started"] == 2
    assert list(dead_letters(run)) == [jobs[0].message_id]
    assert queue_counts(run) == (0, 0)


DENIABLE = [
    "DescribeStateMachine",
    "ListExecutions",
    "Query",
    "DescribeExecution",
    "ReceiveMessage",
    "BatchWriteItem",
    "PutItem",
    "StartExecution",
    "SendMessage",
    "DeleteMessageBatch",
]


def ended_elsewhere(run: ScenarioRun) -> dict[str, Any]:
    """A status change event of the target state machine for an execution someone else ran."""
    machine = run.stack.state_machine_arn
    return status_change_event(
        execution_arn=execution_arn(machine, "elsewhere"),
        state_machine_arn=machine,
        name="elsewhere",
        status="SUCCEEDED",
        started_at=None,
        stopped_at=run.world.now,
        execution_input=None,
    )


@pytest.mark.parametrize(
    ("operation", "ended"),
    [(operation, False) for operation in DENIABLE] + [("BatchWriteItem", True)],
    ids=[*DENIABLE, "BatchWriteItem-of-ends"],
)
def test_access_denied_stops_the_tick_names_the_call_and_keeps_every_message(
    operation: str, ended: bool, faulty_aws: FaultyAws
) -> None:
    """A role missing one permission fails loudly; nothing is lost, dead-lettered twice or started twice."""
    # A 60 s lag makes the second tick describe the first tick's start.
    run = ScenarioRun(Scenario.empty(3, FaultPlan(lag=Lag(start=60.0, describe=0.0))), faulty_aws)
    warm_up = Job("earlier", "g9", json.dumps({"job": 0, "seconds": 600}), 0)
    run.send(warm_up)
    assert run.tick()["started"] == 1
    jobs = backlog()
    for job in jobs:
        run.send(job)
    run.world.faults.denied = frozenset({operation})
    # A tick a status change event triggers first writes the end it reports.
    event = ended_elsewhere(run) if ended else None
    with pytest.raises(ConfigurationError, match=f"{operation}.* failed with AccessDeniedException"):
        run.tick(event)
    assert queue_counts(run) == (3, 0)
    run.world.faults.denied = frozenset()
    run.advance(100)  # a start recorded before the denied call holds its slot for 90 s
    run.tick()
    assert sorted(dead_letters(run)) == [jobs[0].message_id]
    assert queue_counts(run) == (0, 0)
    assert sorted(execution.name for execution in run.world.executions.values()) == sorted(
        [warm_up.message_id, jobs[1].message_id, jobs[2].message_id]
    )
