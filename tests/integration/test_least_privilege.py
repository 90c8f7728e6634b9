"""Every AWS call the runtime makes is granted by template.yaml, and nothing more is granted."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.template import function_statements
from tests.integration.conftest import Harness

# IAM authorises a batch API with the action of its single-message form.
BATCH_ACTIONS = {
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "sqs:SendMessageBatch": "sqs:SendMessage",
}
SERVICE_PREFIX = {"sfn": "states", "sqs": "sqs", "dynamodb": "dynamodb"}


def test_runtime_calls_exactly_the_actions_the_template_grants(harness: Harness) -> None:
    """Across start, lag, poison, redelivery and throttling, the calls made equal the actions granted."""
    called: set[str] = set()

    def record(model: Any, **_: Any) -> None:
        prefix = SERVICE_PREFIX[model.service_model.service_id.hyphenize()]
        action = f"{prefix}:{model.name}"
        called.add(BATCH_ACTIONS.get(action, action))

    harness.on("before-call", record)
    harness.configure(3)
    harness.send('{"job": 1}', group="a", name="job-1")
    harness.send("not json", group="b")
    harness.tick()
    harness.finish_running()
    harness.send('{"job": 1}', group="a", name="job-1")  # redelivery of a closed execution

    def hide(parsed: dict[str, Any], **_: Any) -> None:
        parsed["executions"] = []

    harness.on("after-call.states.ListExecutions", hide)
    harness.tick()

    harness.fail("states.StartExecution", "ThrottlingException")
    harness.send(json.dumps({"job": 2}), group="c")
    harness.tick()

    granted = {action for statement in function_statements() for action in statement["Action"]}
    assert called == granted
