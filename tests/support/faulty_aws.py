"""A faulty AWS: moto's HTTP server behind a fault-injecting middleware, on the world's clock.

The dispatcher under test talks HTTP to a `ThreadedMotoServer`. Between the two sits
`FaultyAws`, a WSGI middleware in the test process that sees every request and:

- emulates what moto doesn't: `ListExecutions` and `DescribeExecution` as eventually
  consistent as AWS documents them (the `World` says what each read shows), Step
  Functions' name and input validation, SQS's size and attribute limits, and the SQS
  visibility timeout on the virtual clock;
- injects faults on the dispatcher's requests only (recognised by its user agent):
  throttling and 5xx before a request is processed, a 5xx after it was processed (the
  response is lost), and `DeleteMessageBatch` entries that fail;
- emulates `SendTaskSuccess` as AWS answers it (moto's execution switch is off here, so
  it has no task to take a token): the `World`'s gates say whether a token is taken;
- emulates `RedriveExecution` (moto has none; `dispatcher.local.redrive` is the one
  emulation), by the dispatcher or by someone else: the list shows the redriven
  execution with its `redriveDate`, `DescribeExecution` with its `redriveCount`, each
  as late as the lag allows;
- tells the `World` of every start, so it keeps the ground truth every property is
  checked against.

Executions never run by themselves (moto's execution switch is off): `World.advance`
moves the virtual clock and ends the executions whose planned duration is over. The
dispatcher reads the same virtual clock, so a 60 s lag or a 120 s visibility timeout
costs no real time.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import formatdate
from typing import Any

from dispatcher.core.executions import MAX_INPUT_BYTES, name_problem
from dispatcher.core.messages import SQS_MAX_MESSAGE_ATTRIBUTES
from dispatcher.local.account import ACCOUNT_ID, REGION
from dispatcher.local.server import moto_server
from tests.support.exchanges import (
    SERVICE_BY_TARGET,
    THROTTLE_CODES,
    Request,
    Response,
    error_response,
    json_response,
)
from tests.support.gate_world import TASK_TIMED_OUT
from tests.support.runs import InFlight
from tests.support.world import World

DISPATCHER_USER_AGENT = "dispatcher"
VISIBILITY_TIMEOUT_SECONDS = 120.0
REJECTED_INPUT_MARKER = "step-functions-rejects-this"
"""An input containing this string is refused by the emulated Step Functions."""


class FaultyAws:
    """WSGI middleware between the dispatcher and moto (see the module docstring)."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self._app = app
        self.world = World(seed=0, start=0.0)
        """The scenario being run: set it before each one."""
        self.before: Callable[[Request], None] | None = None
        """Called with each request before it is served, outside the world's lock (it may block)."""

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Serve one request: emulate, inject, or pass it through to moto."""
        request = self._read(environ)
        if request is not None and self.before is not None:
            self.before(request)
        if request is None:
            response = self._forward(environ)
        else:
            with self.world.lock:
                response = self._handle(request, environ)
        # Every AWS response says when by the server's clock: here the world's (what `reset-limit` reads).
        headers = [(key, value) for key, value in response.headers if key.lower() != "date"]
        headers.append(("Date", formatdate(self.world.time(), usegmt=True)))
        start_response(response.status, headers)
        return [response.body]

    @staticmethod
    def _read(environ: dict[str, Any]) -> Request | None:
        service_prefix, _, operation = environ.get("HTTP_X_AMZ_TARGET", "").partition(".")
        service = SERVICE_BY_TARGET.get(service_prefix)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        if service is None:
            return None
        from_dispatcher = DISPATCHER_USER_AGENT in environ.get("HTTP_USER_AGENT", "")
        return Request(service, operation, json.loads(raw or b"{}"), from_dispatcher)

    def _forward(self, environ: dict[str, Any], body: dict[str, Any] | None = None) -> Response:
        if body is not None:
            raw = json.dumps(body).encode()
            environ["wsgi.input"] = io.BytesIO(raw)
            environ["CONTENT_LENGTH"] = str(len(raw))
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            captured["status"], captured["headers"] = status, headers

        chunks = self._app(environ, capture)
        try:
            content = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        headers = [(key, value) for key, value in captured["headers"] if key.lower() != "content-length"]
        headers.append(("Content-Length", str(len(content))))
        return Response(captured["status"], headers, content)

    def _handle(self, request: Request, environ: dict[str, Any]) -> Response:
        world = self.world
        operation = request.operation
        if request.from_dispatcher:
            if world.chance(world.faults.throttle.get(operation, 0)):
                world.injected[f"throttle {operation}"] += 1
                return error_response(THROTTLE_CODES[request.service], "Rate exceeded (injected)")
            if world.chance(world.faults.server_error.get(operation, 0)):
                world.injected[f"5xx {operation}"] += 1
                return error_response("InternalFailure", "injected before processing", 500)
            if world.faults.enabled and operation in world.faults.denied:
                world.injected[f"access denied {operation}"] += 1
                return error_response(
                    "AccessDeniedException", f"not authorized to perform {request.service}:{operation}"
                )
        response = self._emulate(request, environ)
        if (
            request.from_dispatcher
            and response.ok
            and world.chance(world.faults.lost_response.get(operation, 0))
        ):
            world.injected[f"lost response {operation}"] += 1
            return error_response("InternalFailure", "injected after processing", 500)
        return response

    def _emulate(self, request: Request, environ: dict[str, Any]) -> Response:
        handlers = {
            "ListExecutions": self._list_executions,
            "DescribeExecution": self._describe_execution,
            "StartExecution": self._start_execution,
            "RedriveExecution": self._redrive_execution,
            "SendTaskSuccess": self._send_task_success,
            "ReceiveMessage": self._receive_message,
            "DeleteMessageBatch": self._delete_message_batch,
            "ChangeMessageVisibilityBatch": self._change_visibility_batch,
            "SendMessage": self._send_message,
            "SendMessageBatch": self._send_message_batch,
        }
        emulate = handlers.get(request.operation)
        if request.service == "dynamodb" and request.operation == "PutItem":
            return self._put_item(request, environ)
        if request.service == "dynamodb" and request.operation == "UpdateItem":
            return self._update_item(request, environ)
        if emulate is None or request.service not in {"states", "sqs"}:
            return self._forward(environ)
        return emulate(request, environ)

    def _put_item(self, request: Request, environ: dict[str, Any]) -> Response:
        """Moto's; an adaptive pool's limit the dispatcher wrote is shown to the world's watch."""
        response = self._forward(environ)
        watch = self.world.adaptive
        if watch is not None and request.from_dispatcher and response.ok:
            with self.world.lock:
                self.world.violations += watch.written(request.body.get("Item", {}))
        return response

    def _update_item(self, request: Request, environ: dict[str, Any]) -> Response:
        """Moto's, but for DynamoDB's 400 KB: an update that would grow an item past it is refused.

        Moto checks a `PutItem`'s size, not an `UpdateItem`'s. Emulated: the item's size now
        (moto's count) plus the names and values the update brings (an upper bound: it
        counts a REMOVE's names too) over 400,000 bytes is a ValidationException, as DynamoDB's.
        """
        body = request.body
        item = dynamodb_item(body.get("TableName", ""), body.get("Key", {}))
        brought = sum(len(str(name).encode()) for name in body.get("ExpressionAttributeNames", {}).values())
        brought += len(json.dumps(body.get("ExpressionAttributeValues", {})).encode())
        if (0 if item is None else item.size()) + brought > ITEM_SIZE_LIMIT:
            return error_response(
                "ValidationException", "Item size to update has exceeded the maximum allowed size"
            )
        return self._forward(environ)

    # -- Step Functions ---------------------------------------------------------------

    def _list_executions(self, request: Request, environ: dict[str, Any]) -> Response:
        if not request.from_dispatcher or request.body.get("statusFilter") != "RUNNING":
            return self._forward(environ)
        machine = request.body["stateMachineArn"]
        prefix = machine.replace(":stateMachine:", ":execution:") + ":"
        listed = [item for item in self.world.listed_running() if item[0].arn.startswith(prefix)]
        offset = int(request.body.get("nextToken") or 0)
        size = int(request.body.get("maxResults") or 100)
        page = listed[offset : offset + size]
        document: dict[str, Any] = {"executions": []}
        for execution, redriven_at in page:
            item: dict[str, Any] = {
                "executionArn": execution.arn,
                "stateMachineArn": machine,
                "name": execution.name,
                "status": "RUNNING",
                "startDate": execution.started_at,
            }
            if redriven_at is not None:
                item["redriveCount"] = len(execution.runs) - 1
                item["redriveDate"] = redriven_at
            document["executions"].append(item)
        if offset + size < len(listed):
            document["nextToken"] = str(offset + size)
        return json_response(200, document)

    def _describe_execution(self, request: Request, environ: dict[str, Any]) -> Response:
        response = self._forward(environ)
        if not request.from_dispatcher or not response.ok:
            return response
        arn = request.body["executionArn"]
        described = self.world.described(arn)
        if described is None:
            self.world.injected["describe lag: does not exist"] += 1
            return error_response("ExecutionDoesNotExist", f"Execution Does Not Exist: '{arn}'")
        status, redrive_count = described
        document = response.json()
        if status == "RUNNING" and self.world.truly(arn) != (status, redrive_count):
            self.world.injected["describe lag: still RUNNING"] += 1
        document["status"] = status
        document["redriveCount"] = redrive_count
        document.pop("error", None)
        if status == "RUNNING":
            document.pop("stopDate", None)
        else:
            run = self.world.executions[arn].runs[redrive_count]
            document["stopDate"] = run.ended_at
            if run.error is not None:
                document["error"] = run.error
        return json_response(200, document)

    def _redrive_execution(self, request: Request, environ: dict[str, Any]) -> Response:
        """What AWS does (`Redrives`, the project's one emulation); moto has no RedriveExecution."""
        world = self.world

        def run_again(arn: str) -> None:
            world.redrive(arn, by_dispatcher=request.from_dispatcher)
            backend_execution(arn).status = "RUNNING"

        answer = world.redrives.redrive(
            str(request.body.get("executionArn", "")),
            str(request.body.get("clientToken") or ""),
            world.now,
            world.stopped,
            run_again,
        )
        if answer.repeated:
            world.injected["redrive repeated with its client token"] += 1
        return json_response(answer.status, answer.document)

    def _send_task_success(self, request: Request, environ: dict[str, Any]) -> Response:
        """What AWS does with a task token (`tests.support.gate_world`): moto runs no execution here."""
        gates = self.world.gates
        if gates is None:
            return self._forward(environ)
        code = gates.succeed(str(request.body.get("taskToken", "")))
        if code is None:
            return json_response(200, {})
        if code == TASK_TIMED_OUT:
            return error_response(code, "Task Timed Out: 'Provided task does not exist anymore'")
        return error_response(code, "Invalid Token: 'Invalid token'")

    def _start_execution(self, request: Request, environ: dict[str, Any]) -> Response:
        name = str(request.body.get("name", ""))
        execution_input = str(request.body.get("input", "{}"))
        # Step Functions' own validation, which moto leaves out.
        problem = name_problem(name)
        if problem is not None:
            return error_response("InvalidName", f"Invalid Name: '{name}' ({problem})")
        if len(execution_input.encode()) > MAX_INPUT_BYTES:
            return error_response("InvalidExecutionInput", "Input exceeds the maximum size")
        if REJECTED_INPUT_MARKER in execution_input:
            return error_response("InvalidExecutionInput", "Invalid State Machine Execution Input")
        response = self._forward(environ)
        if response.ok:
            arn = response.json()["executionArn"]
            self.world.started(arn, name, execution_input, by_dispatcher=request.from_dispatcher)
        return response

    # -- SQS --------------------------------------------------------------------------

    def _receive_message(self, request: Request, environ: dict[str, Any]) -> Response:
        response = self._forward(environ)
        if not response.ok:
            return response
        document = response.json()
        messages = document.get("Messages", [])
        if request.from_dispatcher:
            visible_at = self.world.now + VISIBILITY_TIMEOUT_SECONDS
            for message in messages:
                self.world.in_flight[message["MessageId"]] = InFlight(message["ReceiptHandle"], visible_at)
                self.world.received.setdefault(message["MessageId"], []).append(self.world.now)
        # SentTimestamp on the virtual clock, like every other time the dispatcher reads.
        stamped = [message for message in messages if "SentTimestamp" in message.get("Attributes", {})]
        for message in stamped:
            sent_at = self.world.sent_at.get(message["MessageId"], self.world.now)
            message["Attributes"]["SentTimestamp"] = str(int(sent_at * 1000))
        return json_response(200, document) if stamped else response

    def _send_message(self, request: Request, environ: dict[str, Any]) -> Response:
        """SQS's own limits, which moto leaves out: ten attributes, and a size that counts them."""
        attributes = request.body.get("MessageAttributes") or {}
        if len(attributes) > SQS_MAX_MESSAGE_ATTRIBUTES:
            return error_response(
                "InvalidParameterValue",
                f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum"
                f" [{SQS_MAX_MESSAGE_ATTRIBUTES}].",
            )
        size = len(str(request.body.get("MessageBody", "")).encode()) + sum(
            len(name.encode()) + len(value["DataType"].encode()) + _value_bytes(value)
            for name, value in attributes.items()
        )
        limit = queue_size_limit(request.body["QueueUrl"])
        if size > limit:
            return error_response(
                "InvalidParameterValue",
                f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes.",
            )
        response = self._forward(environ)
        if response.ok:
            self.world.sent_at.setdefault(response.json()["MessageId"], self.world.now)
        return response

    def _send_message_batch(self, request: Request, environ: dict[str, Any]) -> Response:
        response = self._forward(environ)
        if response.ok:
            for entry in response.json().get("Successful", []):
                self.world.sent_at.setdefault(entry["MessageId"], self.world.now)
        return response

    def _settled(self, entries: list[dict[str, Any]], successful: list[dict[str, Any]]) -> None:
        done = {entry["Id"] for entry in successful}
        handles = {entry["ReceiptHandle"] for entry in entries if entry["Id"] in done}
        for message_id, held in list(self.world.in_flight.items()):
            if held.receipt_handle in handles:
                del self.world.in_flight[message_id]

    def _delete_message_batch(self, request: Request, environ: dict[str, Any]) -> Response:
        entries = request.body.get("Entries", [])
        failing = []
        if request.from_dispatcher:
            failing = [entry for entry in entries if self.world.chance(self.world.faults.partial_delete)]
        if not failing:
            response = self._forward(environ)
        else:
            self.world.injected["failed DeleteMessageBatch entry"] += len(failing)
            kept = [entry for entry in entries if entry not in failing]
            response = self._forward(environ, {**request.body, "Entries": kept}) if kept else None
            document = response.json() if response is not None and response.ok else {"Successful": []}
            document["Failed"] = [
                *document.get("Failed", []),
                *({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"} for entry in failing),
            ]
            response = json_response(200, document)
        if response.ok:
            self._settled(entries, response.json().get("Successful", []))
        return response

    def _change_visibility_batch(self, request: Request, environ: dict[str, Any]) -> Response:
        response = self._forward(environ)
        if response.ok:
            entries = request.body.get("Entries", [])
            released = [entry for entry in entries if int(entry.get("VisibilityTimeout", 1)) == 0]
            self._settled(released, response.json().get("Successful", []))
        return response


@contextmanager
def faulty_moto_server(host: str = "127.0.0.1") -> Iterator[tuple[str, FaultyAws]]:
    """Run moto's HTTP server behind `FaultyAws`; yield its endpoint URL and the middleware.

    moto doesn't run executions here: they end by the virtual clock (`World.advance`).
    """
    made: list[FaultyAws] = []

    def wrap(app: Callable[..., Any]) -> FaultyAws:
        made.append(FaultyAws(app))
        return made[0]

    with moto_server(host, execute=False, wrap=wrap) as endpoint_url:
        yield endpoint_url, made[0]


def _value_bytes(value: dict[str, Any]) -> int:
    if "StringValue" in value:
        return len(str(value["StringValue"]).encode())
    return len(base64.b64decode(value.get("BinaryValue", "")))


def queue_size_limit(queue_url: str) -> int:
    """A queue's MaximumMessageSize, from moto's own record (same process as the server)."""
    from moto.sqs.models import sqs_backends  # noqa: PLC0415

    return int(sqs_backends[ACCOUNT_ID][REGION].get_queue(queue_url.rsplit("/", 1)[-1]).maximum_message_size)


ITEM_SIZE_LIMIT = 400_000
"""DynamoDB's largest item, as its documentation says (moto's own check, of a `PutItem`, allows 405,000)."""


def dynamodb_item(table: str, key: dict[str, Any]) -> Any:
    """Moto's own record of an item (None: none; same process as the server)."""
    from moto.dynamodb.models import dynamodb_backends  # noqa: PLC0415

    try:
        return dynamodb_backends[ACCOUNT_ID][REGION].get_item(table, key)
    except Exception:  # no such table: moto's own error answers the call
        return None


def backend_execution(arn: str) -> Any:
    """Moto's own record of an execution (same process as the server)."""
    from moto.stepfunctions.models import stepfunctions_backends  # noqa: PLC0415

    return stepfunctions_backends[ACCOUNT_ID][REGION].describe_execution(arn)
