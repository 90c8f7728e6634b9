"""An embedded AWS: moto's server with the dispatcher's resources, for `dispatcher local`, the demo and tests.

Local only: moto and requests are imported when used, and the Lambda artifact leaves
this module out.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
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


STATUS_CHANGE = "Step Functions Execution Status Change"
FAILED_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")
CLOSED_STATUSES = ("SUCCEEDED", *FAILED_STATUSES)
EVENT_DATA_LIMIT_BYTES = 248 * 1024
"""A status change event leaves the input out when input and output together are larger."""
SPOOL_RETENTION_SECONDS = 14 * 24 * 3600
REDRIVE_WINDOW_SECONDS = 14 * 24 * 3600
CLIENT_TOKEN_SECONDS = 15 * 60
INVOKE_PATH = re.compile(r"/2015-03-31/functions/(?P<function>[^/]+)/invocations")
DOWNSTREAM_KEY = {"pk": {"S": "downstream"}, "sk": {"S": "status"}}
DOWNSTREAM_ERROR = "DownstreamUnavailable"


def sample_workflow(wait_seconds: float, downstream_table: str | None = None) -> str:
    """A STANDARD workflow like the template's sample: wait, then succeed.

    With ``downstream_table``, it then asks a simulated downstream API (an item in that
    DynamoDB table, which `set_downstream` flips) and fails with
    ``DownstreamUnavailable`` while the API is down: the runbook's outage.
    """
    if downstream_table is None:
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
    down = {"Variable": "$.downstream.Item.down.BOOL", "BooleanEquals": True}
    return json.dumps(
        {
            "Comment": "Sample job: wait, call the (simulated) downstream API, succeed unless it is down.",
            "StartAt": "Work",
            "States": {
                "Work": {"Type": "Wait", "Seconds": wait_seconds, "Next": "CallDownstream"},
                "CallDownstream": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::dynamodb:getItem",
                    "Parameters": {"TableName": downstream_table, "Key": DOWNSTREAM_KEY},
                    "ResultPath": "$.downstream",
                    "Next": "Answered",
                },
                "Answered": {
                    "Type": "Choice",
                    "Choices": [
                        {"And": [{"Variable": "$.downstream.Item", "IsPresent": True}, down], "Next": "Down"}
                    ],
                    "Default": "Done",
                },
                "Down": {
                    "Type": "Fail",
                    "Error": DOWNSTREAM_ERROR,
                    "Cause": "the downstream API is in maintenance",
                },
                "Done": {"Type": "Succeed"},
            },
        }
    )


def set_downstream(table: str, *, up: bool) -> None:
    """Bring the simulated downstream API of `sample_workflow` down, or back up."""
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=table, Item={**DOWNSTREAM_KEY, "down": {"BOOL": not up}}
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
    spool_queue_url: str = ""
    downstream_table: str = ""

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
            **({"SpoolQueueUrl": self.spool_queue_url} if self.spool_queue_url else {}),
            **({"DispatcherFunctionName": function_name} if function_name else {}),
        }


def create_stack(  # noqa: PLR0913 — each keyword is a stack option
    prefix: str | None = None,
    *,
    wait_seconds: float = 1,
    state_machine_type: str = "STANDARD",
    max_receive_count: int = 100,
    control: Control | None = None,
    downstream: bool = False,
) -> Stack:
    """Create queue, DLQ, failure spool, state table, control parameter and a sample workflow.

    ``control``: the control parameter's first value; None leaves the parameter out
    (the environment's MAX applies), as a stack deployed before it existed.
    ``downstream``: the workflow calls a simulated downstream API (`set_downstream`).
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
    spool_url = sqs.create_queue(
        QueueName=f"{prefix}-failures",
        Attributes={"MessageRetentionPeriod": str(SPOOL_RETENTION_SECONDS), "SqsManagedSseEnabled": "true"},
    )["QueueUrl"]
    downstream_table = ""
    if downstream:
        downstream_table = f"{prefix}-downstream"
        dynamodb.create_table(
            TableName=downstream_table,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
    state_machine_arn = stepfunctions.create_state_machine(
        name=f"{prefix}-workflow",
        definition=sample_workflow(wait_seconds, downstream_table or None),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/{prefix}-workflow",
        type=state_machine_type,  # type: ignore[arg-type]
    )["stateMachineArn"]
    parameter = f"/{prefix}/dispatcher/control"
    if control is not None:
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name=parameter, Value=control.as_json(), Type="String"
        )
    return Stack(queue_url, dead_letter_url, state_machine_arn, table, parameter, spool_url, downstream_table)


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
    # moto logs every failed state of a workflow it runs as an error: failures are expected here.
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
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


# -- what moto lacks: RedriveExecution and EventBridge's status change events ---------------


def failure_pattern(state_machine_arn: str) -> dict[str, Any]:
    """The failure spool rule's event pattern (the template's `FailureSpoolRule`)."""
    return {
        "source": ["aws.states"],
        "detail-type": [STATUS_CHANGE],
        "detail": {"stateMachineArn": [state_machine_arn], "status": list(FAILED_STATUSES)},
    }


def refill_pattern(state_machine_arn: str) -> dict[str, Any]:
    """The refill rule's event pattern (the template's `ExecutionEnded` event)."""
    return {
        "source": ["aws.states"],
        "detail-type": [STATUS_CHANGE],
        "detail": {"stateMachineArn": [state_machine_arn], "status": list(CLOSED_STATUSES)},
    }


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


def _epoch_ms(moment: Any) -> int | None:
    if moment is None:
        return None
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)
    return int(float(moment) * 1000)


def status_change_event(description: dict[str, Any]) -> dict[str, Any]:
    """The event EventBridge delivers for an execution that ended, from its `DescribeExecution`.

    As AWS does: the input is left out (``inputDetails.included`` false) when input and
    output together are larger than 248 KiB.
    """
    execution_input = description.get("input")
    output = description.get("output")
    too_large = len((execution_input or "").encode()) + len((output or "").encode()) > EVENT_DATA_LIMIT_BYTES
    stop = _epoch_ms(description.get("stopDate"))
    redrive_count = int(description.get("redriveCount") or 0)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": STATUS_CHANGE,
        "source": "aws.states",
        "account": ACCOUNT_ID,
        "time": datetime.fromtimestamp((stop or 0) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [description["executionArn"]],
        "detail": {
            "executionArn": description["executionArn"],
            "stateMachineArn": description["stateMachineArn"],
            "name": description["name"],
            "status": description["status"],
            "startDate": _epoch_ms(description.get("startDate")),
            "stopDate": stop,
            "input": None if too_large else execution_input,
            "output": None if too_large else output,
            "inputDetails": {"included": not too_large},
            "outputDetails": {"included": not too_large} if output is not None else None,
            "error": description.get("error"),
            "cause": description.get("cause"),
            "redriveCount": redrive_count,
            "redriveDate": _epoch_ms(description.get("redriveDate")),
            "redriveStatus": "REDRIVABLE" if description["status"] in FAILED_STATUSES else "NOT_REDRIVABLE",
        },
    }


@dataclass
class Rule:
    """An EventBridge rule: events matching ``pattern`` go to ``deliver``."""

    pattern: dict[str, Any]
    deliver: Callable[[dict[str, Any]], None]


@dataclass
class _Redrive:
    count: int = 0
    date: float | None = None


class Emulation:
    """WSGI middleware in front of moto, for what it lacks (local use and tests; not AWS).

    Emulated, and nothing more:

    - `RedriveExecution`: a FAILED, TIMED_OUT or ABORTED execution that stopped less than
      14 days ago is RUNNING again under the same name and ARN, with ``redriveCount`` one
      higher and ``redriveDate`` now. A ``clientToken`` seen in the last 15 minutes
      answers as before and redrives nothing. Any other status: ``ExecutionNotRedrivable``.
      Unlike AWS, which continues from the failed state, moto runs the whole definition
      again with the same input (when it runs state machines at all; otherwise the
      execution stays RUNNING until stopped).
    - ``redriveCount`` and ``redriveDate`` in `DescribeExecution` and `ListExecutions`.
    - EventBridge: when an execution reaches a closed status (polled every
      ``poll_seconds``), a "Step Functions Execution Status Change" event built from its
      `DescribeExecution` goes to every `Rule` whose pattern matches, once per run.
      Exactly once and in order, unlike EventBridge, which may lose, repeat or reorder
      (the fault harness emulates those).
    - Lambda `Invoke` (request-response) of the functions in ``functions``, by name or
      ARN: the function is a Python callable run here with the event; what it returns is
      the payload, and what it raises is an ``Unhandled`` function error, as Lambda
      reports one. Other functions are moto's (which needs Docker to run them).
    """

    def __init__(self, app: Callable[..., Any], poll_seconds: float = 0.2) -> None:
        self._app = app
        self.poll_seconds = poll_seconds
        self.rules: list[Rule] = []
        self.functions: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._redrives: dict[str, _Redrive] = {}
        self._tokens: dict[str, tuple[float, float]] = {}
        self._delivered: set[tuple[str, int]] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._client: Any = None

    # -- HTTP -------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Serve one request: emulate `RedriveExecution` or `Invoke`, annotate redrives, or pass through."""
        function = self._invoked(environ)
        if function is not None:
            return self._invoke(function, environ, start_response)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target not in {
            "AWSStepFunctions.RedriveExecution",
            "AWSStepFunctions.DescribeExecution",
            "AWSStepFunctions.ListExecutions",
        }:
            return self._app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        request = json.loads(raw or b"{}")
        if target.endswith("RedriveExecution"):
            status, document = self.redrive(str(request.get("executionArn", "")), request.get("clientToken"))
        else:
            status, document = self._annotated(environ)
        body = json.dumps(document, default=str).encode()
        start_response(
            status,
            [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def _annotated(self, environ: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        captured: dict[str, str] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            captured["status"] = status

        chunks = self._app(environ, capture)
        try:
            document = json.loads(b"".join(chunks) or b"{}")
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        if captured["status"].startswith("2"):
            for item in [document, *document.get("executions", [])]:
                redrive = self._redrives.get(item.get("executionArn", ""))
                if redrive is not None:
                    item["redriveCount"] = redrive.count
                    item["redriveDate"] = redrive.date
                    if item.get("status") == "RUNNING":
                        item.pop("stopDate", None)
        return captured["status"], document

    # -- Lambda Invoke ------------------------------------------------------------------

    def _invoked(self, environ: dict[str, Any]) -> Callable[[dict[str, Any]], Any] | None:
        """The emulated function a request-response `Invoke` names, if it names one."""
        match = INVOKE_PATH.fullmatch(urllib.parse.unquote(environ.get("PATH_INFO", "")))
        if environ.get("REQUEST_METHOD") != "POST" or match is None:
            return None
        if environ.get("HTTP_X_AMZ_INVOCATION_TYPE", "RequestResponse") != "RequestResponse":
            return None
        return self.functions.get(match["function"].rsplit(":function:", 1)[-1].split(":")[0])

    def _invoke(
        self,
        function: Callable[[dict[str, Any]], Any],
        environ: dict[str, Any],
        start_response: Callable[..., Any],
    ) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        headers = [("Content-Type", "application/json"), ("X-Amz-Executed-Version", "$LATEST")]
        try:
            body = json.dumps(function(json.loads(raw or b"{}")), default=str).encode()
        except Exception as error:  # Lambda reports any exception as a function error
            body = json.dumps({"errorMessage": str(error), "errorType": type(error).__name__}).encode()
            headers.append(("X-Amz-Function-Error", "Unhandled"))
        start_response("200 OK", [*headers, ("Content-Length", str(len(body)))])
        return [body]

    # -- RedriveExecution ---------------------------------------------------------------

    def redrive(self, arn: str, client_token: str | None = None) -> tuple[str, dict[str, Any]]:
        """Redrive execution ``arn``; the HTTP status and the JSON answer."""
        from moto.stepfunctions.responses import get_backend  # noqa: PLC0415 — local-only

        now = time.time()
        with self._lock:
            if client_token:
                self._tokens = {
                    token: seen
                    for token, seen in self._tokens.items()
                    if now - seen[0] < CLIENT_TOKEN_SECONDS
                }
                if client_token in self._tokens:
                    return "200 OK", {"redriveDate": self._tokens[client_token][1]}
            try:
                execution = get_backend(ACCOUNT_ID, REGION).describe_execution(arn)
            except Exception:  # moto's "does not exist", whatever its class
                return "400 Bad Request", {
                    "__type": "ExecutionDoesNotExist",
                    "message": f"Execution Does Not Exist: '{arn}'",
                }
            status = str(getattr(execution.status, "value", execution.status))
            stopped = _epoch_ms(execution.stop_date)
            if status not in FAILED_STATUSES or stopped is None:
                return "400 Bad Request", {
                    "__type": "ExecutionNotRedrivable",
                    "message": f"Execution is {status}: only FAILED, TIMED_OUT or ABORTED can be redriven",
                }
            if now - stopped / 1000 > REDRIVE_WINDOW_SECONDS:
                return "400 Bad Request", {
                    "__type": "ExecutionNotRedrivable",
                    "message": "Execution stopped more than 14 days ago",
                }
            redrive = self._redrives.setdefault(arn, _Redrive())
            redrive.count += 1
            redrive.date = now
            if client_token:
                self._tokens[client_token] = (now, now)
            _run_again(execution)
            return "200 OK", {"redriveDate": now}

    # -- EventBridge --------------------------------------------------------------------

    def start_events(self, endpoint_url: str) -> None:
        """Start delivering status change events (needs the server's URL to describe executions)."""
        self._client = local_client("stepfunctions", endpoint_url)
        self._watcher = threading.Thread(target=self._watch, name="eventbridge-emulator", daemon=True)
        self._watcher.start()

    def stop_events(self) -> None:
        """Stop delivering."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=10)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            with contextlib.suppress(Exception):  # a rule's target failing must not stop the others
                self.deliver_due()

    def deliver_due(self) -> int:
        """Deliver the events of executions that ended since the last call; how many were delivered."""
        from moto.stepfunctions.responses import get_backend  # noqa: PLC0415 — local-only

        delivered = 0
        backend = get_backend(ACCOUNT_ID, REGION)
        ended = [
            execution.execution_arn
            for machine in list(backend.state_machines)
            for execution in list(machine.executions)
            if str(getattr(execution.status, "value", execution.status)) in CLOSED_STATUSES
        ]
        for arn in ended:
            key = (arn, self._redrives.get(arn, _Redrive()).count)
            if key in self._delivered:
                continue
            self._delivered.add(key)
            description = self._client.describe_execution(executionArn=arn)
            event = status_change_event(description)
            for rule in list(self.rules):
                if matches(rule.pattern, event):
                    rule.deliver(event)
                    delivered += 1
        return delivered


def _run_again(execution: Any) -> None:
    """Make moto's execution RUNNING again (and, when moto runs state machines, run it)."""
    execution.stop_date = None
    execution.error = None
    execution.cause = None
    if hasattr(execution, "exec_worker"):
        from moto.stepfunctions.parser.api import ExecutionStatus  # noqa: PLC0415 — local-only

        execution.exec_worker = None
        execution.exec_status = ExecutionStatus.RUNNING
        execution.start()
    else:
        execution.status = "RUNNING"


def local_client(service: str, endpoint_url: str) -> Any:
    """A boto3 client for the emulator at ``endpoint_url``, whatever the environment says."""
    return boto3.client(
        service,  # type: ignore[call-overload]  # any service the emulator serves
        region_name=REGION,
        endpoint_url=endpoint_url,
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def to_queue(queue_url: str, endpoint_url: str) -> Callable[[dict[str, Any]], None]:
    """An EventBridge target: each event, whole, as the body of a message on an SQS queue."""
    sqs = local_client("sqs", endpoint_url)

    def deliver(event: dict[str, Any]) -> None:
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(event))

    return deliver


@contextmanager
def emulated_server(
    host: str = "127.0.0.1", *, port: int = 0, execute: bool = True
) -> Iterator[tuple[str, Emulation]]:
    """`moto_server` behind `Emulation`, delivering events; yield the endpoint URL and the emulation.

    Add `Rule`s to ``emulation.rules`` (e.g. the failure spool: `failure_pattern`, `to_queue`).
    """
    made: list[Emulation] = []

    def wrap(app: Callable[..., Any]) -> Emulation:
        made.append(Emulation(app))
        return made[0]

    with moto_server(host, port=port, execute=execute, wrap=wrap) as endpoint_url:
        emulation = made[0]
        # A workflow's service tasks (e.g. dynamodb:getItem) call moto back on MOTO_PORT.
        saved_port = os.environ.get("MOTO_PORT")
        os.environ["MOTO_PORT"] = endpoint_url.rsplit(":", 1)[-1]
        emulation.start_events(endpoint_url)
        try:
            yield endpoint_url, emulation
        finally:
            emulation.stop_events()
            if saved_port is None:
                os.environ.pop("MOTO_PORT", None)
            else:
                os.environ["MOTO_PORT"] = saved_port
