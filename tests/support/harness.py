"""What the integration tests do to their harness: lanes, jobs sent, RUNNING, throttles, lagging lists."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import ClientError

from dispatcher.local.account import ACCOUNT_ID, REGION
from tests.support.moto_harness import Harness


def lanes(harness: Harness, max_concurrency: int, document: dict[str, Any]) -> None:
    """Configures the harness with MAX and a ``LANES`` document."""
    harness.configure(max_concurrency, lanes=json.dumps(document))


def send(url: str, jobs: list[str], *, group: str | None = None) -> None:
    """Queues ``jobs`` on ``url``, one message each (each its own group unless ``group``)."""
    sqs = boto3.client("sqs", region_name=REGION)
    for job in jobs:
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps({"job": job}),
            MessageGroupId=group or job,
            MessageDeduplicationId=uuid.uuid4().hex,
        )


def running_of(harness: Harness, arn: str) -> int:
    """RUNNING executions of ``arn`` as `ListExecutions` shows them (through the harness's hooks)."""
    pages = harness.sfn.get_paginator("list_executions").paginate(stateMachineArn=arn, statusFilter="RUNNING")
    return sum(len(page["executions"]) for page in pages)


def running_in_moto(arn: str) -> int:
    """RUNNING executions of ``arn`` as moto holds them: the truth, without a listing or its lag."""
    from moto.stepfunctions.models import stepfunctions_backends  # noqa: PLC0415

    machine = stepfunctions_backends[ACCOUNT_ID][REGION].describe_state_machine(arn)
    return sum(execution.status == "RUNNING" for execution in machine.executions)


def still_listed(harness: Harness, *names: str, redriven_at: datetime | None = None) -> Callable[..., None]:
    """ListExecutions lag after an end: the list keeps showing ``names`` as RUNNING."""

    def hook(parsed: dict[str, Any], **_: Any) -> None:
        listed = {item["name"] for item in parsed["executions"]}
        for name in names:
            if name not in listed:
                item: dict[str, Any] = {
                    "executionArn": harness.arn_of(name),
                    "stateMachineArn": harness.stack.state_machine_arn,
                    "name": name,
                    "status": "RUNNING",
                    "startDate": datetime.now(UTC),
                }
                if redriven_at is not None:
                    item["redriveDate"] = redriven_at
                parsed["executions"].insert(0, item)

    return hook


def throttle_every_start(harness: Harness) -> dict[str, int]:
    """Every StartExecution of the handler throttled after retries; the starts tried, and most at once.

    A throttled start takes a while (botocore's retries back off): the calls a tick sends at
    once meet in the hook (up to a second) before each is throttled, so a tick that sends
    more than ten at once is seen doing it.
    """
    lock = threading.Lock()
    counts = {"tried": 0, "in_flight": 0, "most": 0}
    crowd = threading.Event()

    def throttle_after_a_while(**_: Any) -> None:
        with lock:
            counts["tried"] += 1
            counts["in_flight"] += 1
            counts["most"] = max(counts["most"], counts["in_flight"])
            if counts["in_flight"] > 10:
                crowd.set()
        try:
            crowd.wait(timeout=1)
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "StartExecution"
            )
        finally:
            with lock:
                counts["in_flight"] -= 1

    harness.on("before-call.states.StartExecution", throttle_after_a_while)
    return counts
