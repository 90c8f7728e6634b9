"""What moto lacks, emulated at the HTTP layer in front of it: RedriveExecution, EventBridge, Lambda Invoke.

Local use and tests only; not AWS. Each emulation is the project's one: `Redrives` for
`RedriveExecution` and `status_change_event` for EventBridge's events, which the fault
harness and the in-memory AWS use too.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dispatcher.core.executions import CLOSED_STATUSES
from dispatcher.local.account import ACCOUNT_ID, REGION, local_client
from dispatcher.local.events import Rule, event_from_description, matches, seconds
from dispatcher.local.redrive import RedriveAnswer, Redrives, Stopped

INVOKE_PATH = re.compile(r"/2015-03-31/functions/(?P<function>[^/]+)/invocations")
SETTLED_PATH = "/_dispatcher/settled"
"""``GET`` here: how many executions run, and how many ended ones still await their events (JSON).

``?state_machine=NAME`` counts only that state machine's executions."""
HTTP_STATUS = {200: "200 OK", 400: "400 Bad Request"}


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
    - `StopExecution`'s ``error`` and ``cause``, which moto drops: `DescribeExecution` of the
      ABORTED execution says them, as AWS's does (and so do its status change events).
    - EventBridge: when an execution reaches a closed status (polled every
      ``poll_seconds``), a "Step Functions Execution Status Change" event built from its
      `DescribeExecution` goes to every `Rule` whose pattern matches, once per run.
      Exactly once and in order, unlike EventBridge, which may lose, repeat or reorder
      (the fault harness emulates those).
    - Lambda `Invoke` (request-response) of the functions in ``functions``, by name or
      ARN: the function is a Python callable run here with the event; what it returns is
      the payload, and what it raises is an ``Unhandled`` function error, as Lambda
      reports one. Other functions are moto's (which needs Docker to run them).

    Not AWS at all: ``GET /_dispatcher/settled`` answers ``{"running", "undelivered"}``,
    so a script (`python -m dispatcher.local settle`) can wait until every execution has
    ended and its event was delivered, instead of sleeping and hoping.
    """

    def __init__(self, app: Callable[..., Any], poll_seconds: float = 0.2) -> None:
        self._app = app
        self.poll_seconds = poll_seconds
        self.rules: list[Rule] = []
        self.functions: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._redrives: dict[str, _Redrive] = {}
        self._stops: dict[str, dict[str, str]] = {}
        """Execution ARN → the error and cause its `StopExecution` gave."""
        self._tokens = Redrives()
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
        if environ.get("REQUEST_METHOD") == "GET" and environ.get("PATH_INFO") == SETTLED_PATH:
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            body = json.dumps(self.settled(query.get("state_machine", [None])[0])).encode()
            start_response(
                "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            )
            return [body]
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target == "AWSStepFunctions.StopExecution":
            self._note_stop(environ)
            return self._app(environ, start_response)
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
            answer = self.redrive(str(request.get("executionArn", "")), request.get("clientToken"))
            status, document = HTTP_STATUS[answer.status], answer.document
        else:
            status, document = self._annotated(environ)
        body = json.dumps(document, default=str).encode()
        start_response(
            status,
            [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def _note_stop(self, environ: dict[str, Any]) -> None:
        """Keep a stop's error and cause (the request goes on to moto as it was)."""
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(raw)
        request = json.loads(raw or b"{}")
        said = {key: request[key] for key in ("error", "cause") if request.get(key) is not None}
        if said:
            with self._lock:
                self._stops[str(request.get("executionArn", ""))] = said

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
            stop = self._stops.get(document.get("executionArn", ""))
            if stop is not None and document.get("status") == "ABORTED" and "executions" not in document:
                for key, value in stop.items():
                    document.setdefault(key, value)
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

    def redrive(self, arn: str, client_token: str | None = None) -> RedriveAnswer:
        """Redrive execution ``arn`` (`Redrives` applies AWS's rules to moto's execution)."""
        from moto.stepfunctions.responses import get_backend  # noqa: PLC0415 — the server's own backend

        backend = get_backend(ACCOUNT_ID, REGION)

        def stopped(execution_arn: str) -> Stopped | None:
            try:
                execution = backend.describe_execution(execution_arn)
            except Exception:  # moto's "does not exist", whatever its class
                return None
            return Stopped(
                str(getattr(execution.status, "value", execution.status)), seconds(execution.stop_date)
            )

        def run_again(execution_arn: str) -> None:
            redrive = self._redrives.setdefault(execution_arn, _Redrive())
            redrive.count += 1
            redrive.date = now
            _run_again(backend.describe_execution(execution_arn))

        with self._lock:
            now = time.time()
            return self._tokens.redrive(arn, client_token, now, stopped, run_again)

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

    def settled(self, state_machine: str | None = None) -> dict[str, int]:
        """Executions still running, and ended ones whose events are not delivered yet.

        ``state_machine``: only that state machine's (by name); else every one moto holds.
        """
        statuses = {
            arn: status
            for arn, status in self._statuses().items()
            if state_machine is None or arn.split(":")[-2] == state_machine
        }
        running = sum(status == "RUNNING" for status in statuses.values())
        undelivered = sum(
            status in CLOSED_STATUSES and self._key(arn) not in self._delivered
            for arn, status in statuses.items()
        )
        return {"running": running, "undelivered": undelivered}

    def deliver_due(self) -> int:
        """Deliver the events of executions that ended since the last call; how many were delivered."""
        delivered = 0
        ended = [arn for arn, status in self._statuses().items() if status in CLOSED_STATUSES]
        for arn in ended:
            key = self._key(arn)
            if key in self._delivered:
                continue
            description = self._client.describe_execution(executionArn=arn)
            event = event_from_description(description)
            for rule in list(self.rules):
                if matches(rule.pattern, event):
                    rule.deliver(event)
                    delivered += 1
            self._delivered.add(key)  # once delivered, so `settled` never counts an event on its way
        return delivered

    def _key(self, arn: str) -> tuple[str, int]:
        """One run of an execution: its ARN and how often it was redriven."""
        return arn, self._redrives.get(arn, _Redrive()).count

    @staticmethod
    def _statuses() -> dict[str, str]:
        """Every execution moto holds, by ARN, with its status."""
        from moto.stepfunctions.responses import get_backend  # noqa: PLC0415 — local-only

        backend = get_backend(ACCOUNT_ID, REGION)
        return {
            execution.execution_arn: str(getattr(execution.status, "value", execution.status))
            for machine in list(backend.state_machines)
            for execution in list(machine.executions)
        }


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
