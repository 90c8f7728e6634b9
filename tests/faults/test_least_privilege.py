"""Least privilege, verified: every call the runtime makes is granted on the resource it touches, and no more.

The calls are recorded by botocore hooks in the dispatcher's own clients (see
`DispatcherProcess`) while fault scenarios run, so they include the rare paths:
dead-lettering, releasing, describing unlisted starts, forgetting records. The
template's statements are resolved against the emulator's resources, as
CloudFormation would resolve them against the stack's.
"""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from dispatcher.core.executions import execution_arn
from dispatcher.local.account import ACCOUNT_ID, REGION
from dispatcher.local.events import END_EVENT_QUEUE_ARN
from dispatcher.local.stack import Stack
from tests.faults.crash_course import crash_course
from tests.faults.process import Call
from tests.faults.run import run_scenario
from tests.faults.scenario import Scenario
from tests.infra.template import Deployed, deployed
from tests.support.crashes import CRASH_POINTS, CrashPlan
from tests.support.faulty_aws import FaultyAws

pytestmark = pytest.mark.no_cover
"""Whole fault scenarios: untraced (tracing doubles a test's CPU time, and the same lines run,
measured, in the tests of each part; CONTRIBUTING, "The suite's time")."""

# IAM authorises a batch API with the action of its single-message form.
BATCH_ACTIONS = {
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "sqs:SendMessageBatch": "sqs:SendMessage",
}


MAPPING_STATEMENTS = {"EndEventQueue"}
"""Statements Lambda's event source mapping uses with the function's role; the code never calls them."""


def queue_arn(url: str) -> str:
    """The ARN of the queue at ``url``."""
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{url.rsplit('/', 1)[-1]}"


def table_arn(name: str) -> str:
    """The ARN of table ``name``."""
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{name}"


def deploy_of(stack: Stack, gate: dict[str, Any] | None = None) -> Deployed:
    """The template deployed for this stack, as CloudFormation would resolve it.

    ``gate``: a gate's entry of ``LANES``, deployed as the manual says for a gate of your
    own (its state machine in GateStateMachineArns, its queues in the Lane…Arns).
    """
    parameters: dict[str, Any] = {"TargetStateMachineArn": stack.state_machine_arn}
    if gate is not None:
        parameters |= {
            "GateStateMachineArns": gate["state_machine_arn"],
            "LaneQueueArns": queue_arn(gate["queue_url"]),
            "LaneDeadLetterQueueArns": queue_arn(gate["dead_letter_queue_url"]),
        }
    return deployed(
        parameters,
        refs={"ControlParameter": stack.control_parameter},
        attributes={
            "JobQueue": queue_arn(stack.queue_url),
            "DeadLetterQueue": queue_arn(stack.dead_letter_queue_url),
            "StateTable": table_arn(stack.state_table),
            "EndEventQueue": END_EVENT_QUEUE_ARN,
        },
    )


def resources(resolved: str | list[str]) -> list[str]:
    """A statement's Resource as a list."""
    return [resolved] if isinstance(resolved, str) else resolved


def touched(call: Call, gate: dict[str, Any] | None) -> tuple[str, str]:
    """The IAM action and resource ARN a recorded call needs.

    A task token names no resource in its call: IAM authorises `SendTaskSuccess` on the
    state machine whose execution's token it is (the gate's).
    """
    action = BATCH_ACTIONS.get(call.action, call.action)
    if call.action == "states:SendTaskSuccess" and gate is not None:
        return action, str(gate["state_machine_arn"])
    if call.action.startswith("sqs:"):
        return action, queue_arn(call.resource)
    if call.action.startswith("dynamodb:"):
        return action, table_arn(call.resource)
    if call.action.startswith("ssm:"):
        # A name that starts with "/" is not repeated after "parameter" in the ARN.
        return action, f"arn:aws:ssm:{REGION}:{ACCOUNT_ID}:parameter{call.resource}"
    return action, call.resource


def test_every_call_is_granted_on_its_resource_and_every_grant_is_used(faulty_aws: FaultyAws) -> None:
    """Each (action, resource) the runtime used is allowed by a statement; each granted action is used."""
    # The crash course reaches the rare paths (dead-lettering, releasing, describing, redriving).
    outcomes = [run_scenario(crash_course(CrashPlan(*CRASH_POINTS[0]), redrives=True), faulty_aws)]
    # Seed 11 has a gated execution that dies inside within a minute of its admission, its
    # event lost: a whole listing can't tell it from one the list doesn't show yet, so only
    # `DescribeExecution` finds it (the other deaths inside are found by listing).
    outcomes += [run_scenario(Scenario.generate(seed), faulty_aws) for seed in (0, 1, 11)]
    ungranted: list[str] = []
    used: set[tuple[str, str]] = set()
    granted: set[tuple[str, str]] = set()
    assert any(outcome.gate is not None for outcome in outcomes), "a scenario with a gate"
    for outcome in outcomes:
        assert outcome.stack is not None
        statements = deploy_of(outcome.stack, outcome.gate).statements().values()
        for call in outcome.calls:
            action, resource = touched(call, outcome.gate)
            granting = [
                statement["Sid"]
                for statement in statements
                if action in statement["Action"]
                and any(
                    fnmatch.fnmatchcase(resource, pattern) for pattern in resources(statement["Resource"])
                )
            ]
            if not granting:
                ungranted.append(f"{action} on {resource}")
            used.update((sid, action) for sid in granting)
        granted |= {
            (statement["Sid"], action)
            for statement in statements
            if statement["Sid"] not in MAPPING_STATEMENTS
            for action in statement["Action"]
        }
    assert ungranted == []
    assert used == granted, f"granted but never called: {sorted(granted - used)}"


def test_role_has_no_wildcard_action_and_no_wildcard_resource(faulty_aws: FaultyAws) -> None:
    """No `*` in an action; a resource wildcard only for the executions of one state machine it names."""
    stack = run_scenario(Scenario.empty(1), faulty_aws).stack
    assert stack is not None
    gated = "arn:aws:states:us-east-1:123456789012:stateMachine:gated"
    gate = {
        "state_machine_arn": gated,
        "queue_url": "q/gate.fifo",
        "dead_letter_queue_url": "q/gate-dlq.fifo",
    }
    for deploy, machines in (
        (deploy_of(stack), [stack.state_machine_arn]),
        (deploy_of(stack, gate), [stack.state_machine_arn, gated]),
    ):
        for statement in deploy.statements().values():
            assert all("*" not in action for action in statement["Action"])
            for resource in statement["Resource"]:
                assert "*" not in resource or resource in [execution_arn(arn, "*") for arn in machines], (
                    resource
                )
