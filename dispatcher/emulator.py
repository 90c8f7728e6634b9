"""An embedded AWS: moto's server with the dispatcher's resources, for `dispatcher local`, the demo and tests.

Local only: moto and requests are imported when used, and the Lambda artifact leaves
this module out.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from dispatcher.control import Control
from dispatcher.planning import DEAD_LETTER_HEADROOM_BYTES, SQS_MAX_MESSAGE_BYTES

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


def sample_workflow(wait_seconds: float) -> str:
    """A STANDARD workflow like the template's sample: wait, then succeed."""
    return json.dumps(
        {
            "Comment": "Sample job: wait, then succeed.",
            "StartAt": "Work",
            "States": {
                "Work": {"Type": "Wait", "Seconds": wait_seconds, "Next": "Done"},
                "Done": {"Type": "Succeed"},
            },
        }
    )


@dataclass
class StartLog:
    """Every `StartExecution` the dispatcher asked for, in call order, seen from its client."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def hook(self, params: dict[str, Any], **_: Any) -> None:
        """Botocore `provide-client-params` hook: note the call before it is sent."""
        self.calls.append({"name": params.get("name"), "input": params.get("input")})

    def install(self) -> StartLog:
        """Hook boto3's default session, whose clients the handler builds."""
        boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
        if session is None:
            raise RuntimeError("boto3 did not create its default session")
        session.events.register("provide-client-params.states.StartExecution", self.hook)
        return self


@dataclass(frozen=True)
class Stack:
    """The resources one dispatcher needs, as the template creates them."""

    queue_url: str
    dead_letter_queue_url: str
    state_machine_arn: str
    state_table: str
    control_parameter: str

    def environment(self, max_concurrency: int, **extra: str) -> dict[str, str]:
        """The dispatcher function's environment for this stack (as the template sets it)."""
        return {
            "QUEUE_URL": self.queue_url,
            "DEAD_LETTER_QUEUE_URL": self.dead_letter_queue_url,
            "STATE_MACHINE_ARN": self.state_machine_arn,
            "MAX_CONCURRENCY": str(max_concurrency),
            "STATE_TABLE": self.state_table,
            "CONTROL_PARAMETER": self.control_parameter,
            **extra,
        }

    def outputs(self, function_name: str = "") -> dict[str, str]:
        """The stack outputs the template declares, for these resources."""
        return {
            "JobQueueUrl": self.queue_url,
            "DeadLetterQueueUrl": self.dead_letter_queue_url,
            "StateMachineArn": self.state_machine_arn,
            "StateTableName": self.state_table,
            "ControlParameterName": self.control_parameter,
            **({"DispatcherFunctionName": function_name} if function_name else {}),
        }


def create_stack(
    prefix: str | None = None,
    *,
    wait_seconds: float = 1,
    state_machine_type: str = "STANDARD",
    max_receive_count: int = 100,
    control: Control | None = None,
) -> Stack:
    """Create queue, DLQ, state table, control parameter and a sample workflow through boto3.

    ``control``: the control parameter's first value; None leaves the parameter out
    (the environment's MAX applies), as a stack deployed before it existed.
    """
    prefix = prefix or f"dispatcher-{uuid.uuid4().hex[:8]}"
    sqs = boto3.client("sqs", region_name=REGION)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    stepfunctions = boto3.client("stepfunctions", region_name=REGION)
    fifo: dict[Any, str] = {"FifoQueue": "true", "SqsManagedSseEnabled": "true"}
    dead_letter_url = sqs.create_queue(
        QueueName=f"{prefix}-dlq.fifo", Attributes={**fifo, "MaximumMessageSize": str(SQS_MAX_MESSAGE_BYTES)}
    )["QueueUrl"]
    dead_letter_arn = sqs.get_queue_attributes(QueueUrl=dead_letter_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    queue_url = sqs.create_queue(
        QueueName=f"{prefix}.fifo",
        Attributes={
            **fifo,
            "MaximumMessageSize": str(SQS_MAX_MESSAGE_BYTES - DEAD_LETTER_HEADROOM_BYTES),
            "ContentBasedDeduplication": "true",
            "VisibilityTimeout": "120",
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": max_receive_count}
            ),
        },
    )["QueueUrl"]
    table = f"{prefix}-state"
    dynamodb.create_table(
        TableName=table,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )
    state_machine_arn = stepfunctions.create_state_machine(
        name=f"{prefix}-workflow",
        definition=sample_workflow(wait_seconds),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/{prefix}-workflow",
        type=state_machine_type,  # type: ignore[arg-type]
    )["stateMachineArn"]
    parameter = f"/{prefix}/dispatcher/control"
    if control is not None:
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name=parameter, Value=control.as_json(), Type="String"
        )
    return Stack(queue_url, dead_letter_url, state_machine_arn, table, parameter)


_SQS_LOCK = threading.RLock()


def atomic_sqs() -> None:
    """Make each of moto's SQS actions atomic, as each SQS request is in AWS (idempotent).

    moto's SQS backend isn't thread-safe: two receives at once can return the same
    message, or fail with "Set changed size during iteration". The dispatcher receives
    in parallel, so every emulator here serialises SQS actions with one lock.
    """
    from moto.sqs.responses import SQSResponse  # noqa: PLC0415 — local-only

    call_action = SQSResponse.call_action
    if getattr(call_action, "atomic", False):
        return

    def atomic(self: Any) -> Any:
        with _SQS_LOCK:
            return call_action(self)

    atomic.atomic = True  # type: ignore[attr-defined]
    SQSResponse.call_action = atomic  # type: ignore[method-assign]


def enable_execution(endpoint_url: str, *, enabled: bool = True) -> None:
    """Make a moto server really run state machines (Wait states take real time), or not.

    The switch is moto's, global to the process: every server in it shares it.
    """
    import requests  # noqa: PLC0415 — local-only

    response = requests.post(
        f"{endpoint_url}/moto-api/config",
        json={"stepfunctions": {"execute_state_machine": enabled}},
        timeout=10,
    )
    response.raise_for_status()


@contextmanager
def moto_server(
    host: str = "127.0.0.1",
    *,
    port: int = 0,
    execute: bool = True,
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> Iterator[str]:
    """Run moto's HTTP server on a loopback port (a free one by default); yield its endpoint URL.

    ``execute``: whether moto really runs state machines. ``wrap``: a WSGI middleware
    factory to put in front of moto (the fault-injection tests use one).
    """
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer  # noqa: PLC0415 — local-only
    from moto.moto_server.werkzeug_app import (  # noqa: PLC0415
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server  # noqa: PLC0415

    atomic_sqs()
    app: Callable[..., Any] = DomainDispatcherApplication(create_backend_app)
    if wrap is not None:
        app = wrap(app)

    class Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = Server(ip_address=host, port=port, verbose=False)
    server.start()
    try:
        _, port = server.get_host_and_port()
        endpoint_url = f"http://{host}:{port}"
        enable_execution(endpoint_url, enabled=execute)  # another server may have set it either way
        try:
            yield endpoint_url
        finally:
            enable_execution(endpoint_url, enabled=False)  # the switch outlives the server
    finally:
        server.stop()


@contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """Set environment variables for a while, then put back what was there."""
    saved = {key: os.environ.get(key) for key in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def pointed_at(endpoint_url: str) -> contextlib.AbstractContextManager[None]:
    """Point every boto3 client at ``endpoint_url`` with fake credentials."""
    return environment({**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint_url})


def read_all(queue_url: str, sqs: Any = None) -> list[dict[str, Any]]:
    """Every message on a queue, with all attributes, deleting each once read.

    Deleting matters on a FIFO queue: a group's later messages are held back while
    an earlier one is in flight. ``sqs`` is the client to read with (a new one by default).
    """
    sqs = sqs or boto3.client("sqs", region_name=REGION)
    found: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return found
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        found.extend(messages)


def send_jobs(queue_url: str, jobs: list[dict[str, Any]]) -> list[str]:
    """Send jobs one by one (FIFO order is send order); return their MessageIds."""
    sqs = boto3.client("sqs", region_name=REGION)
    ids = []
    for job in jobs:
        request: dict[str, Any] = {
            "QueueUrl": queue_url,
            "MessageBody": job["body"],
            "MessageGroupId": job["group"],
            "MessageDeduplicationId": job.get("dedup", uuid.uuid4().hex),
        }
        if "name" in job:
            name = {"DataType": "String", "StringValue": job["name"]}
            request["MessageAttributes"] = {"ExecutionName": name}
        ids.append(sqs.send_message(**request)["MessageId"])
    return ids


class LocalContext:
    """The part of Lambda's context object the handler uses, with a real deadline."""

    function_name = "dispatcher-local"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:dispatcher-local"

    def __init__(self, timeout_seconds: float = 30.0) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before this invocation would time out."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))
