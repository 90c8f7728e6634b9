"""A harness that drives the real handler against moto, with boto3 as the only way in."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from dispatcher import handler
from dispatcher.core.executions import execution_arn
from dispatcher.in_process import LocalContext
from dispatcher.local.account import REGION
from dispatcher.local.events import event_from_description
from dispatcher.local.server import atomic_item_updates, atomic_sqs, patient_task_tokens
from dispatcher.local.stack import Stack, StartLog, create_stack, read_all


@dataclass
class Harness:
    """One dispatcher deployment in moto, and what a test needs to look at it."""

    stack: Stack
    monkeypatch: pytest.MonkeyPatch
    starts: StartLog

    def __post_init__(self) -> None:
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.ssm = boto3.client("ssm", region_name=REGION)

    def configure(self, max_concurrency: int, **settings: Any) -> None:
        """Set the function's environment, as the template would (``settings``: fields of `Settings`)."""
        environment = self.stack.environment(max_concurrency, receive_wait_seconds=0, **settings)
        for key, value in environment.items():
            self.monkeypatch.setenv(key, value)

    def send(
        self, body: str = "{}", *, group: str = "g", name: str | None = None, name_type: str = "String"
    ) -> str:
        """Enqueue one job as a producer would; return its MessageId."""
        request: dict[str, Any] = {
            "QueueUrl": self.stack.queue_url,
            "MessageBody": body,
            "MessageGroupId": group,
            "MessageDeduplicationId": uuid.uuid4().hex,
        }
        if name is not None:
            value_field = "BinaryValue" if name_type == "Binary" else "StringValue"
            value: Any = name.encode() if name_type == "Binary" else name
            request["MessageAttributes"] = {"ExecutionName": {"DataType": name_type, value_field: value}}
        return str(self.sqs.send_message(**request)["MessageId"])

    def tick(
        self, event: Any = None, *, remaining_seconds: float = 30.0, cold: bool = True
    ) -> dict[str, Any]:
        """Invoke the real handler once, as a cold start (or in the same warm container)."""
        if cold:
            handler.reset_clients()
        result = handler.lambda_handler({} if event is None else event, LocalContext(remaining_seconds))
        assert isinstance(result, dict)
        return result

    def start_directly(self, name: str, execution_input: str = "{}") -> str:
        """Start an execution outside the dispatcher (someone else's load)."""
        return str(
            self.sfn.start_execution(
                stateMachineArn=self.stack.state_machine_arn, name=name, input=execution_input
            )["executionArn"]
        )

    def executions(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every execution of the state machine (moto's list has no lag), oldest first."""
        request: dict[str, Any] = {"stateMachineArn": self.stack.state_machine_arn}
        if status:
            request["statusFilter"] = status
        pages = self.sfn.get_paginator("list_executions").paginate(**request)
        found = [execution for page in pages for execution in page["executions"]]
        return sorted(found, key=lambda execution: execution["startDate"])

    def running(self) -> int:
        """RUNNING executions right now."""
        return len(self.executions("RUNNING"))

    def status_change(self, name: str, status: str = "SUCCEEDED", **detail: Any) -> dict[str, Any]:
        """The status change event EventBridge delivers for ``name`` (``detail``: fields to change)."""
        description = self.sfn.describe_execution(executionArn=self.arn_of(name))
        event = event_from_description({**description, "status": status})
        event["detail"].update(detail)
        return event

    def arn_of(self, name: str) -> str:
        """The ARN of execution ``name`` of the stack's state machine."""
        return execution_arn(self.stack.state_machine_arn, name)

    def finish_running(self) -> int:
        """End every RUNNING execution, as if the workflows completed; return how many."""
        running = self.executions("RUNNING")
        for execution in running:
            self.sfn.stop_execution(executionArn=execution["executionArn"])
        return len(running)

    def input_of(self, name: str) -> str:
        """The input Step Functions holds for execution ``name``."""
        return str(self.sfn.describe_execution(executionArn=self.arn_of(name))["input"])

    def queue_counts(self, url: str | None = None) -> tuple[int, int]:
        """(visible, in flight) messages on the source queue, or on ``url``."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url or self.stack.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]), int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def dead_letters(self) -> list[dict[str, Any]]:
        """Every message on the DLQ (deleted once read)."""
        return read_all(self.stack.dead_letter_queue_url)

    def on(self, event_name: str, hook: Any) -> None:
        """Register a botocore event hook on the clients the handler builds next."""
        session = boto3.DEFAULT_SESSION
        assert session is not None
        session.events.register(event_name, hook)

    def fail(
        self, call: str, code: str, message: str = "injected", *, status: int = 400, after: int = 0
    ) -> None:
        """Make the handler's ``call`` (``states.StartExecution``) raise ``code`` once ``after`` succeeded.

        Raised before the request is sent, so botocore's retries don't see it: this is
        what a call still failing after every retry looks like to the dispatcher.
        """
        calls = {"count": 0}
        error: Any = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }

        def hook(**_: Any) -> None:
            calls["count"] += 1
            if calls["count"] > after:
                raise ClientError(error, call.split(".")[1])

        self.on(f"before-call.{call}", hook)

    def clear_hooks(self) -> None:
        """Drop every hook registered with `on` (the start log stays)."""
        self.starts.install()

    def redeliver(self, receipt_handles: list[str]) -> None:
        """Make in-flight messages visible again, as their visibility timeout ending would."""
        for handle in receipt_handles:
            self.sqs.change_message_visibility(
                QueueUrl=self.stack.queue_url, ReceiptHandle=handle, VisibilityTimeout=0
            )

    def started_jobs(self) -> list[Any]:
        """The `job` field of each started input, in StartExecution call order."""
        return [json.loads(call["input"])["job"] for call in self.starts.calls]

    def started_by_group(self, group_of: Callable[[Any], str]) -> dict[str, list[Any]]:
        """Started jobs per group, each list in StartExecution call order."""
        by_group: dict[str, list[Any]] = defaultdict(list)
        for job in self.started_jobs():
            by_group[group_of(job)].append(job)
        return dict(by_group)


def make_harness(monkeypatch: pytest.MonkeyPatch, **stack_options: Any) -> Harness:
    """A dispatcher deployment in this process's moto (mocked by the caller), at MAX 5."""
    atomic_sqs()
    atomic_item_updates()
    patient_task_tokens()
    starts = StartLog().install()
    harness = Harness(create_stack(**stack_options), monkeypatch, starts)
    harness.configure(5)
    return harness
