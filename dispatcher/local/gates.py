"""A gate in the emulator, as the template makes one: its queues, and the sample gated workflow.

The sample gated workflow is the one the template deploys and the manual's ASL: a free
part, a wake (a ``sqs:sendMessage`` task to the end-event queue, so the dispatcher ticks
within seconds rather than at the next minute), the gate (a
``sqs:sendMessage.waitForTaskToken`` task sending the request), the
section (a Wait standing in for the scarce step), the release (a ``sqs:sendMessage`` task
to the end-event queue), a free part again.
"""

from __future__ import annotations

import json
from typing import Any

import boto3

from dispatcher.core.events import GATE_KEY, RELEASE_KEY, WAKE_KEY
from dispatcher.core.gates import EXECUTION_KEY, TOKEN_KEY
from dispatcher.local.account import ACCOUNT_ID, REGION
from dispatcher.local.stack import job_queues
from dispatcher.settings import TEMPLATE_GATE

GATE = TEMPLATE_GATE
WAKE, ENTER, SECTION, LEAVE = "Wake dispatcher", "Enter gate", "Section", "Leave gate"
"""The sample's states around the section: the wake, the request, the scarce step, the release."""


def gated_workflow(  # noqa: PLR0913 — the gate, its queues and the workflow's options
    gate: str,
    gate_queue_url: str,
    release_queue_url: str,
    *,
    free_seconds: float = 1,
    section_seconds: float = 1,
    group_path: str = "$$.Execution.Name",
    group_from_input: bool = False,
    wake_queue_url: str | None = None,
) -> str:
    """The sample gated workflow's ASL: free part → wake → gate → section → release → free part.

    Each request is its own message group (the execution's name), so the gate's queue
    hands out many at once, oldest first; one fixed group would admit in strict send
    order, ten at a time. ``group_path``: where the request's group comes from instead
    (``$.tenant``: the input's, for a gate with a limit per group). ``group_from_input``:
    the input's ``group`` when it has one, else the execution's name (`dispatcher local`'s
    gates, so ``gated N --group G`` can try a gate's ``max_per_group``).
    ``wake_queue_url``: where the wake goes (the end-event queue, as the release; the
    template names it ``${WakeQueueUrl}``).

    The wake goes just before the request, which waits for its token: were the wake's
    tick to run before the request is queued, the dispatcher ticks once more when the
    wake's second has passed (DESIGN.md "Start on arrival").
    """
    states: dict[str, Any] = {}
    first = WAKE
    if group_from_input:
        first, group_path = "Choose group", "$.gate_group.id"
        states = {
            first: {
                "Type": "Choice",
                "Choices": [{"Variable": "$.group", "IsPresent": True, "Next": "Group from input"}],
                "Default": "Group by name",
            },
            "Group from input": _group_from("$.group"),
            "Group by name": _group_from("$$.Execution.Name"),
        }
    return json.dumps(
        {
            "Comment": "A gated workflow: a free part, the section a gate guards, a free part again.",
            "StartAt": "Prepare",
            "States": {
                "Prepare": {"Type": "Wait", "Seconds": free_seconds, "Next": first},
                **states,
                WAKE: {
                    "Type": "Task",
                    "Comment": "Tell the dispatcher a request is coming, so it admits within seconds.",
                    "Resource": "arn:aws:states:::sqs:sendMessage",
                    "Parameters": {
                        "QueueUrl": wake_queue_url or release_queue_url,
                        "MessageBody": {WAKE_KEY: gate},
                    },
                    "ResultPath": None,
                    "Next": ENTER,
                },
                ENTER: {
                    "Type": "Task",
                    "Comment": "Wait here, at no cost, until the dispatcher admits this execution.",
                    "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {
                        "QueueUrl": gate_queue_url,
                        "MessageGroupId.$": group_path,
                        "MessageBody": {
                            f"{TOKEN_KEY}.$": "$$.Task.Token",
                            f"{EXECUTION_KEY}.$": "$$.Execution.Id",
                        },
                    },
                    "ResultPath": "$.gate",
                    "Next": SECTION,
                },
                SECTION: {
                    "Type": "Wait",
                    "Comment": "Stands in for the scarce step: a Glue job, a partner API's call.",
                    "Seconds": section_seconds,
                    "Next": LEAVE,
                },
                LEAVE: {
                    "Type": "Task",
                    "Comment": "Free the place at once (the execution's end would free it too).",
                    "Resource": "arn:aws:states:::sqs:sendMessage",
                    "Parameters": {
                        "QueueUrl": release_queue_url,
                        "MessageBody": {f"{RELEASE_KEY}.$": "$$.Execution.Id", GATE_KEY: gate},
                    },
                    "ResultPath": None,
                    "Next": "Finish",
                },
                "Finish": {"Type": "Wait", "Seconds": free_seconds, "Next": "Done"},
                "Done": {"Type": "Succeed"},
            },
        }
    )


def _group_from(path: str) -> dict[str, Any]:
    """A Pass state that keeps the request's message group (from ``path``) at ``$.gate_group.id``."""
    return {"Type": "Pass", "Parameters": {"id.$": path}, "ResultPath": "$.gate_group", "Next": WAKE}


def create_release_queue(stack: str) -> str:
    """The stack's end-event queue (``<stack>-end-events``, standard), where releases go too; its URL."""
    sqs = boto3.client("sqs", region_name=REGION)
    return str(sqs.create_queue(QueueName=f"{stack}-end-events")["QueueUrl"])


def create_gate(  # noqa: PLR0913 — each keyword is a gate option
    stack: str,
    name: str,
    *,
    release_queue_url: str,
    state_machine_arn: str | None = None,
    free_seconds: float = 1,
    section_seconds: float = 1,
    group_path: str = "$$.Execution.Name",
    **options: Any,
) -> dict[str, Any]:
    """Create a gate's queues (``<stack>-<name>-jobs.fifo``) and, unless given, its sample gated workflow.

    Returns the gate's entry of ``LANES`` (``options``: ``pool``, ``max_concurrency``).
    """
    queue_url, dead_letter_url = job_queues(boto3.client("sqs", region_name=REGION), f"{stack}-{name}", 100)
    if state_machine_arn is None:
        definition = gated_workflow(
            name,
            queue_url,
            release_queue_url,
            free_seconds=free_seconds,
            section_seconds=section_seconds,
            group_path=group_path,
        )
        state_machine_arn = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
            name=gated_name(stack, name),
            definition=definition,
            roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/{stack}-workflow",
        )["stateMachineArn"]
    return {
        "name": name,
        "queue_url": queue_url,
        "dead_letter_queue_url": dead_letter_url,
        "state_machine_arn": state_machine_arn,
        **options,
    }


def gated_name(stack: str, gate: str = GATE) -> str:
    """The sample gated workflow's state machine of a gate in stack ``stack``."""
    return f"{stack}-{gate}-gated"
