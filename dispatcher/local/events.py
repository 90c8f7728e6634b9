"""EventBridge, as far as the dispatcher needs it: status change events, rules, and delivering to SQS.

moto emits no EventBridge events. This is the one builder of a "Step Functions Execution
Status Change" event: the local emulator builds them from moto's executions, and the fault
harness and the in-memory AWS from their own.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dispatcher.core.events import EVENT_SOURCE, SQS_EVENT_SOURCE, STATUS_CHANGE
from dispatcher.core.executions import REDRIVABLE_STATUSES
from dispatcher.local.account import ACCOUNT_ID, REGION, local_client

EVENT_DATA_LIMIT_BYTES = 248 * 1024
"""A status change event leaves the input out when input and output together are larger."""


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def status_change_event(  # noqa: PLR0913 — one keyword per field of the event
    *,
    execution_arn: str,
    state_machine_arn: str,
    name: str,
    status: str,
    started_at: float | None,
    stopped_at: float | None,
    execution_input: str | None,
    output: str | None = None,
    error: str | None = None,
    cause: str | None = None,
    redrive_count: int = 0,
    redriven_at: float | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    """The event EventBridge delivers for an execution's status (times in epoch seconds).

    As AWS does: the input is left out (``inputDetails.included`` false) when input and
    output together are larger than 248 KiB.
    """
    too_large = len((execution_input or "").encode()) + len((output or "").encode()) > EVENT_DATA_LIMIT_BYTES
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": STATUS_CHANGE,
        "source": EVENT_SOURCE,
        "account": ACCOUNT_ID,
        "time": datetime.fromtimestamp(stopped_at or 0, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [execution_arn],
        "detail": {
            "executionArn": execution_arn,
            "stateMachineArn": state_machine_arn,
            "name": name,
            "status": status,
            "startDate": _ms(started_at),
            "stopDate": _ms(stopped_at),
            "input": None if too_large else execution_input,
            "output": None if too_large else output,
            "inputDetails": {"included": not too_large},
            "outputDetails": {"included": not too_large} if output is not None else None,
            "error": error,
            "cause": cause,
            "redriveCount": redrive_count,
            "redriveDate": _ms(redriven_at),
            "redriveStatus": "REDRIVABLE" if status in REDRIVABLE_STATUSES else "NOT_REDRIVABLE",
        },
    }


def seconds(moment: Any) -> float | None:
    """An API time (a datetime, ISO 8601 text, or epoch seconds) in epoch seconds."""
    if moment is None:
        return None
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return float(moment.timestamp())
    return float(moment)


def event_from_description(description: dict[str, Any]) -> dict[str, Any]:
    """The status change event of an execution, from its `DescribeExecution`."""
    return status_change_event(
        execution_arn=description["executionArn"],
        state_machine_arn=description["stateMachineArn"],
        name=description["name"],
        status=description["status"],
        started_at=seconds(description.get("startDate")),
        stopped_at=seconds(description.get("stopDate")),
        execution_input=description.get("input"),
        output=description.get("output"),
        error=description.get("error"),
        cause=description.get("cause"),
        redrive_count=int(description.get("redriveCount") or 0),
        redriven_at=seconds(description.get("redriveDate")),
    )


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether ``event`` matches an EventBridge pattern of exact values (lists of allowed values)."""
    for key, expected in pattern.items():
        if key not in event:
            return False
        actual = event[key]
        if isinstance(expected, dict):
            if not isinstance(actual, dict) or not matches(expected, actual):
                return False
        elif actual not in expected:
            return False
    return True


@dataclass
class Rule:
    """An EventBridge rule: events matching ``pattern`` go to ``deliver``."""

    pattern: dict[str, Any]
    deliver: Callable[[dict[str, Any]], None]


def to_queue(queue_url: str, endpoint_url: str) -> Callable[[dict[str, Any]], None]:
    """An EventBridge target: each event, whole, as the body of a message on an SQS queue."""
    sqs = local_client("sqs", endpoint_url)

    def deliver(event: dict[str, Any]) -> None:
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(event))

    return deliver


END_EVENT_QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:dispatcher-end-events"
"""The end-event queue the emulations deliver batches from (the template's `EndEventQueue`)."""


def sqs_event(
    bodies: list[str], queue_arn: str = END_EVENT_QUEUE_ARN, sent_at: float | Sequence[float] | None = None
) -> dict[str, Any]:
    """The event an SQS event source mapping invokes a function with: one record per message body.

    ``sent_at``: when the messages were sent (each record's ``SentTimestamp``; one moment
    for all, or one a body); now by default.
    """
    ids = [str(uuid.uuid4()) for _ in bodies]
    moments = (
        sent_at
        if isinstance(sent_at, Sequence)
        else [time.time() if sent_at is None else sent_at] * len(bodies)
    )
    return {
        "Records": [
            {
                "messageId": message_id,
                "receiptHandle": f"handle-{message_id}",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": sent},
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
                "eventSource": SQS_EVENT_SOURCE,
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for message_id, body, sent in zip(
                ids, bodies, (str(int(moment * 1000)) for moment in moments), strict=True
            )
        ]
    }
