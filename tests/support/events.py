"""Messages and events as the tick receives them: a queued message, a status change event, an SQS record."""

from __future__ import annotations

import json
from typing import Any

from dispatcher.core.messages import (
    QueuedMessage,
)


def message(
    body: str = "{}", *, message_id: str = "m-1", group: str = "g", **fields: object
) -> QueuedMessage:
    """A received job with ``body``."""
    return QueuedMessage(message_id=message_id, receipt_handle="r", body=body, group_id=group, **fields)


def status_change(**detail: object) -> dict[str, object]:
    """An EventBridge execution status change event with ``detail``."""
    return {
        "version": "0",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "time": "2026-11-21T12:00:05Z",
        "detail": {
            "executionArn": f"{MACHINE.replace(':stateMachine:', ':execution:')}:job-1",
            "stateMachineArn": MACHINE,
            "name": "job-1",
            "status": "SUCCEEDED",
            "startDate": 1_795_262_400_000,
            "stopDate": 1_795_262_404_500,
            **detail,
        },
    }


MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"


def record(body: object, message_id: str = "m-1") -> dict[str, Any]:
    """One record as an SQS event source mapping delivers it."""
    return {
        "messageId": message_id,
        "receiptHandle": "handle",
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ends",
        "awsRegion": "us-east-1",
    }
