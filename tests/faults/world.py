"""A faulty AWS: moto's server behind a fault-injecting middleware, on a virtual clock.

The dispatcher under test talks HTTP to a `ThreadedMotoServer`. Between the two sits
`FaultyAws`, a WSGI middleware in the test process that sees every request and:

- emulates what moto doesn't: `ListExecutions` and `DescribeExecution` as eventually
  consistent as AWS documents them (a new execution missing, a finished one still
  RUNNING), Step Functions' name and input validation, and the SQS visibility timeout
  on the virtual clock;
- injects faults on the dispatcher's requests only (recognised by its user agent):
  throttling and 5xx before a request is processed, a 5xx after it was processed (the
  response is lost), and `DeleteMessageBatch` entries that fail;
- keeps the ground truth every property is checked against: when each execution
  started and ended on the virtual clock, in which order, and how many ran at once at
  the moment of each start;
- emulates what EventBridge would deliver, which moto doesn't: a "Step Functions
  Execution Status Change" event for every execution that ends, each one lost,
  duplicated or delayed (so reordered, or late) as the scenario's `EventPlan` draws;
- emulates `RedriveExecution` (moto has none), by the dispatcher or by someone else:
  a FAILED, TIMED_OUT or ABORTED execution runs again under the same name and ARN, the
  list shows it with its `redriveDate`, `DescribeExecution` with its `redriveCount`
  (each as late as the lag allows), a ``clientToken`` seen before redrives nothing
  again, and any other status is refused with ``ExecutionNotRedrivable``;
- emulates the failure spool's EventBridge rule: the status change event of every run
  that ends FAILED goes to the spool queue, sometimes twice. A run whose input says
  ``{"downstream": true}`` fails when it ends during the world's outage
  (``outage_until``), as a job calling a downstream API in maintenance would.

Executions never run by themselves (moto's execution switch is off): `World.advance`
moves the virtual clock and ends the executions whose planned duration is over. The
dispatcher reads the same virtual clock, so a 60 s lag or a 120 s visibility timeout
costs no real time.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dispatcher.core.executions import MAX_INPUT_BYTES, REDRIVABLE_STATUSES, name_problem, state_machine_of
from dispatcher.core.messages import SQS_MAX_MESSAGE_ATTRIBUTES
from dispatcher.local.account import ACCOUNT_ID, REGION
from dispatcher.local.events import status_change_event
from dispatcher.local.redrive import Redrives, Stopped
from dispatcher.local.server import moto_server
from dispatcher.settings import Settings

DISPATCHER_USER_AGENT = "dispatcher"
VISIBILITY_TIMEOUT_SECONDS = 120.0
REJECTED_INPUT_MARKER = "step-functions-rejects-this"
"""An input containing this string is refused by the emulated Step Functions."""

THROTTLE_CODES = {
    "states": "ThrottlingException",
    "sqs": "RequestThrottled",
    "dynamodb": "ThrottlingException",
    "ssm": "ThrottlingException",
}
SERVICE_BY_TARGET = {
    "AWSStepFunctions": "states",
    "AmazonSQS": "sqs",
    "DynamoDB_20120810": "dynamodb",
    "AmazonSSM": "ssm",
}
LIST_REUSE_SECONDS = float(Settings.model_fields["list_reuse_seconds"].default)
"""How long the dispatcher may reuse a list read (its default): a foreign execution counts once
a read at least this old could have shown it."""


@dataclass
class Lag:
    """How stale `ListExecutions` and `DescribeExecution` may be, in virtual seconds.

    ``start``: a new execution may be missing from the list for up to this long.
    ``end``: a finished execution may still be listed (and described) as RUNNING.
    ``describe``: `DescribeExecution` may say a new execution does not exist.
    ``flaky``: each call draws its own staleness (an execution seen once may be missed
    again by a later call, as reads from different replicas would); otherwise each
    execution has one fixed delay and, once seen, stays seen.
    """

    start: float = 0.0
    end: float = 0.0
    describe: float = 0.0
    flaky: bool = False


@dataclass
class EventPlan:
    """How the emulated EventBridge delivers status change events of ended executions."""

    enabled: bool = False
    lost: float = 0.0
    """Chance an event is never delivered."""
    duplicated: float = 0.0
    """Chance an event is delivered twice (each copy with its own delay)."""
    delay: float = 0.0
    """Each delivery comes up to this many seconds after the end (so events reorder)."""


@dataclass
class FaultPlan:
    """Which faults the middleware injects into the dispatcher's requests."""

    throttle: dict[str, float] = field(default_factory=dict)
    """Operation (e.g. ``StartExecution``) → chance a request is throttled."""
    server_error: dict[str, float] = field(default_factory=dict)
    """Operation → chance of a 500 before the request is processed."""
    lost_response: dict[str, float] = field(default_factory=dict)
    """Operation → chance the request is processed and the client gets a 500."""
    partial_delete: float = 0.0
    """Chance each `DeleteMessageBatch` entry fails (reported in ``Failed``)."""
    denied: frozenset[str] = frozenset()
    """Operations the dispatcher's role may not call (AccessDeniedException)."""
    lag: Lag = field(default_factory=Lag)
    enabled: bool = True

    def quiet(self) -> None:
        """Switch injected faults off (the documented lag of AWS stays)."""
        self.enabled = False


@dataclass
class Run:
    """One run of an execution: its start, and a redrive is another run of the same execution."""

    started_at: float
    planned_end: float
    appear_after: float
    vanish_after: float
    ended_at: float | None = None
    status: str = "SUCCEEDED"
    """How this run ended (FAILED when it called the downstream API during the outage)."""

    def running_at(self, moment: float) -> bool:
        """Whether this run was RUNNING at ``moment``."""
        return self.started_at <= moment and (self.ended_at is None or self.ended_at > moment)


@dataclass
class Execution:
    """One execution as the ground truth knows it, on the virtual clock."""

    arn: str
    name: str
    input: str
    sequence: int
    by_dispatcher: bool
    describe_after: float
    runs: list[Run]

    @property
    def started_at(self) -> float:
        """When the execution was first started."""
        return self.runs[0].started_at

    @property
    def ended_at(self) -> float | None:
        """When its latest run ended (None while it runs)."""
        return self.runs[-1].ended_at

    @property
    def redriven_at(self) -> float | None:
        """When it was last redriven, if ever."""
        return self.runs[-1].started_at if len(self.runs) > 1 else None

    def running_at(self, moment: float) -> bool:
        """Whether the execution was RUNNING at ``moment``."""
        return any(run.running_at(moment) for run in self.runs)


@dataclass(order=True)
class Delivery:
    """A status change event EventBridge will deliver at ``at``."""

    at: float
    sequence: int
    event: dict[str, Any] = field(compare=False)


@dataclass
class InFlight:
    """A message the dispatcher received and has neither deleted nor released."""

    receipt_handle: str
    visible_at: float


class World:
    """The ground truth: virtual time, executions, in-flight messages, injected faults.

    With a ``clock`` (the benchmark's `time.time`) the world runs on real time instead:
    `advance(0, ...)` then only ends the executions whose time has come.
    """

    def __init__(
        self,
        *,
        seed: int,
        start: float,
        faults: FaultPlan | None = None,
        events: EventPlan | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._virtual_now = start
        self._clock = clock
        self.faults = faults or FaultPlan()
        self.events = events or EventPlan()
        # One stream per purpose: concurrent starts reach the world in any order, and
        # separate streams keep each kind of draw the same whatever that order is.
        self.rng = random.Random(f"{seed}:faults")
        self.lag_rng = random.Random(f"{seed}:lag")
        self.event_rng = random.Random(f"{seed}:events")
        self.executions: dict[str, Execution] = {}
        self.in_flight: dict[str, InFlight] = {}
        self.sent_at: dict[str, float] = {}
        """SQS MessageId → when it was sent, on the virtual clock (its SentTimestamp)."""
        self.deliveries: list[Delivery] = []
        self._deliveries_made = itertools.count()
        self.injected: Counter[str] = Counter()
        self.violations: list[str] = []
        self.max_concurrency: int | None = None
        self.outage_until = 0.0
        """Until then, runs of jobs that call the downstream API fail."""
        self.spooled: list[dict[str, Any]] = []
        """Failure events for the spool queue, to be sent outside the lock (`take_spooled`)."""
        self.redrives = Redrives()
        """The client tokens of recent redrives (AWS's rules: `Redrives`)."""
        self.dispatcher_redrives: list[tuple[str, int]] = []
        """(execution name, its redriveCount before) for each redrive the dispatcher made."""
        self.lock = threading.RLock()

    # -- time -------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The world's time: virtual, or the real clock it was given."""
        return self._virtual_now if self._clock is None else self._clock()

    def time(self) -> float:
        """The virtual clock, in epoch seconds (the dispatcher's `time.time`)."""
        return self.now

    def advance(self, seconds: float, end: Callable[[Execution], None]) -> None:
        """Move the clock; end executions whose duration is over (and queue their events)."""
        with self.lock:
            if self._clock is None:
                self._virtual_now += seconds
            for execution in self.executions.values():
                run = execution.runs[-1]
                if run.ended_at is None and run.planned_end <= self.now:
                    run.ended_at = max(run.planned_end, run.started_at)
                    if _calls_downstream(execution.input) and run.ended_at < self.outage_until:
                        run.status = "FAILED"
                    end(execution)
                    self._emit_end(execution)

    def next_moment(self) -> float | None:
        """The next virtual time something happens by itself: an end, or an event delivery."""
        with self.lock:
            ends = [
                execution.runs[-1].planned_end
                for execution in self.executions.values()
                if execution.runs[-1].ended_at is None
            ]
            deliveries = [delivery.at for delivery in self.deliveries]
            return min([*ends, *deliveries], default=None)

    def due_events(self) -> list[dict[str, Any]]:
        """Events whose delivery time has come, in delivery order; they leave the queue."""
        with self.lock:
            self.deliveries.sort()
            due = [delivery for delivery in self.deliveries if delivery.at <= self.now]
            self.deliveries = self.deliveries[len(due) :]
            return [delivery.event for delivery in due]

    def take_spooled(self) -> list[dict[str, Any]]:
        """Failure events due for the spool; they leave the world."""
        with self.lock:
            spooled, self.spooled = self.spooled, []
            return spooled

    def _emit_end(self, execution: Execution) -> None:
        status = execution.runs[-1].status
        if status in REDRIVABLE_STATUSES:
            event = execution_event(execution, status)
            copies = 2 if self.event_rng.random() < self.events.duplicated else 1
            self.spooled += [event] * copies
        plan = self.events
        if not plan.enabled:
            return
        if self.event_rng.random() < plan.lost:
            self.injected["status change event lost"] += 1
            return
        copies = 2 if self.event_rng.random() < plan.duplicated else 1
        if copies == 2:
            self.injected["status change event duplicated"] += 1
        event = execution_event(execution, status)
        for _ in range(copies):
            at = self.now + self.event_rng.uniform(0, plan.delay)
            self.deliveries.append(Delivery(at, next(self._deliveries_made), event))

    def redrive(self, arn: str, seconds: float | None = None, *, by_dispatcher: bool = False) -> None:
        """Redrive an ended execution: it runs again, for ``seconds`` or as its input says (moto has none).

        A redrive by the dispatcher is checked against the cap like a start.
        """
        with self.lock:
            execution = self.executions[arn]
            lag = self.faults.lag
            planned = _planned_seconds(execution.input) if seconds is None else seconds
            execution.runs.append(
                Run(
                    started_at=self.now,
                    planned_end=self.now + planned,
                    appear_after=self.lag_rng.uniform(0, lag.start),
                    vanish_after=self.lag_rng.uniform(0, lag.end),
                )
            )
            if by_dispatcher:
                self.dispatcher_redrives.append((execution.name, len(execution.runs) - 2))
                self._check_cap(f"the dispatcher redrove {execution.name}")

    def expired_in_flight(self) -> list[str]:
        """Receipt handles whose visibility timeout is over; they are forgotten here."""
        with self.lock:
            expired = [
                message_id for message_id, held in self.in_flight.items() if held.visible_at <= self.now
            ]
            return [self.in_flight.pop(message_id).receipt_handle for message_id in expired]

    # -- ground truth -----------------------------------------------------------------

    def running(self, moment: float | None = None) -> list[Execution]:
        """Executions RUNNING at ``moment`` (now by default)."""
        at = self.now if moment is None else moment
        return [execution for execution in self.executions.values() if execution.running_at(at)]

    def started(self, arn: str, name: str, execution_input: str, *, by_dispatcher: bool) -> None:
        """Note a new execution; check the cap at the moment a dispatcher start happens."""
        with self.lock:
            if arn in self.executions:
                return
            seconds = _planned_seconds(execution_input)
            lag = self.faults.lag
            run = Run(
                started_at=self.now,
                planned_end=self.now + seconds,
                appear_after=self.lag_rng.uniform(0, lag.start),
                vanish_after=self.lag_rng.uniform(0, lag.end),
            )
            self.executions[arn] = Execution(
                arn=arn,
                name=name,
                input=execution_input,
                sequence=len(self.executions),
                by_dispatcher=by_dispatcher,
                describe_after=self.lag_rng.uniform(0, lag.describe),
                runs=[run],
            )
            if by_dispatcher:
                self._check_cap(f"the dispatcher started {name}")

    def _check_cap(self, what: str) -> None:
        if self.max_concurrency is None:
            return
        counted = [execution for execution in self.running() if self._accountable(execution)]
        if len(counted) > self.max_concurrency:
            self.violations.append(f"cap: {len(counted)} RUNNING > MAX {self.max_concurrency} after {what}")

    def _accountable(self, execution: Execution) -> bool:
        """Whether the dispatcher must count this execution when it starts another.

        Its own starts always (it recorded them); someone else's (a start or a redrive)
        once a `ListExecutions` read the dispatcher may still be reusing could show it:
        a foreign start the list doesn't show yet is invisible to anyone.
        """
        if execution.by_dispatcher:
            return True
        run = execution.runs[-1]
        delay = self.faults.lag.start if self.faults.lag.flaky else run.appear_after
        return run.started_at + delay + LIST_REUSE_SECONDS <= self.now

    def _stale_delay(self, fixed: float, bound: float) -> float:
        return self.lag_rng.uniform(0, bound) if self.faults.lag.flaky else fixed

    def _listed(self, run: Run) -> bool:
        lag = self.faults.lag
        if run.started_at + self._stale_delay(run.appear_after, lag.start) > self.now:
            return False
        return run.ended_at is None or run.ended_at + self._stale_delay(run.vanish_after, lag.end) > self.now

    def listed_running(self) -> list[tuple[Execution, float | None]]:
        """What an eventually consistent `ListExecutions(RUNNING)` returns now, newest first.

        Each listed execution comes with the redriveDate the list shows: the latest
        run's once the list has caught up with it, none while it still shows an earlier
        run that has ended (the end lag).
        """
        listed = []
        for execution in self.executions.values():
            shown = [run for run in execution.runs if self._listed(run)]
            if shown:
                redriven_at = None if shown[-1] is execution.runs[0] else shown[-1].started_at
                listed.append((execution, redriven_at))
        return sorted(listed, key=lambda item: -item[0].sequence)

    def described(self, arn: str) -> tuple[str, int] | None:
        """What an eventually consistent `DescribeExecution` says: status and redriveCount, or None (missing).

        A redrive shows once the start lag of its run has passed; until then the read
        shows the run before it.
        """
        execution = self.executions.get(arn)
        if execution is None:
            return None
        lag = self.faults.lag
        if execution.started_at + self._stale_delay(execution.describe_after, lag.describe) > self.now:
            return None
        index = len(execution.runs) - 1
        while index > 0 and (
            execution.runs[index].started_at
            + self._stale_delay(execution.runs[index].appear_after, lag.start)
            > self.now
        ):
            index -= 1
        run = execution.runs[index]
        if run.ended_at is None or run.ended_at + self._stale_delay(run.vanish_after, lag.end) > self.now:
            return "RUNNING", index
        return run.status, index

    def truly(self, arn: str) -> tuple[str, int] | None:
        """Status and redriveCount as they are (what `RedriveExecution` itself goes by)."""
        execution = self.executions.get(arn)
        if execution is None:
            return None
        run = execution.runs[-1]
        return ("RUNNING" if run.ended_at is None else run.status), len(execution.runs) - 1

    def stopped(self, arn: str) -> Stopped | None:
        """Status and stop time as they are (what `RedriveExecution` goes by); None: no such execution."""
        execution = self.executions.get(arn)
        if execution is None:
            return None
        run = execution.runs[-1]
        return Stopped("RUNNING" if run.ended_at is None else run.status, run.ended_at)

    def chance(self, rate: float) -> bool:
        """Draw whether a fault that hits at ``rate`` hits now (never while faults are off)."""
        return self.faults.enabled and rate > 0 and self.rng.random() < rate


def execution_event(
    execution: Execution, status: str, state_machine_arn: str | None = None
) -> dict[str, Any]:
    """The status change event of ``execution``'s latest run, as EventBridge delivers it."""
    run = execution.runs[-1]
    failed = status in REDRIVABLE_STATUSES
    return status_change_event(
        execution_arn=execution.arn,
        state_machine_arn=state_machine_arn or state_machine_of(execution.arn),
        name=execution.name,
        status=status,
        started_at=execution.started_at,
        stopped_at=None if status == "RUNNING" else run.ended_at,
        execution_input=execution.input,
        error="Job.Failed" if failed else None,
        cause="planned by the scenario" if failed else None,
        redrive_count=len(execution.runs) - 1,
        redriven_at=execution.redriven_at,
        event_id=f"event-{execution.sequence}-{len(execution.runs)}-{status}",
    )


def _calls_downstream(execution_input: str) -> bool:
    """Whether the job calls the downstream API (so fails during an outage)."""
    try:
        document = json.loads(execution_input)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("downstream") is True


def _planned_seconds(execution_input: str) -> float:
    try:
        document = json.loads(execution_input)
    except ValueError:
        return 0.0
    seconds = document.get("seconds", 0.0) if isinstance(document, dict) else 0.0
    return float(seconds) if isinstance(seconds, int | float) else 0.0


# -- the middleware ---------------------------------------------------------------------


@dataclass
class Request:
    """One request as the middleware sees it."""

    service: str
    operation: str
    body: dict[str, Any]
    from_dispatcher: bool


@dataclass
class Response:
    """A WSGI response, buffered so it can be inspected or replaced."""

    status: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def ok(self) -> bool:
        """2xx."""
        return self.status.startswith("2")

    def json(self) -> Any:
        """The JSON body."""
        return json.loads(self.body or b"{}")


def json_response(status: int, document: dict[str, Any]) -> Response:
    """A JSON-protocol response."""
    reason = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}[status]
    body = json.dumps(document, default=str).encode()
    headers = [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))]
    return Response(f"{status} {reason}", headers, body)


def error_response(code: str, message: str, status: int = 400) -> Response:
    """An AWS JSON-protocol error, as botocore parses it."""
    return json_response(status, {"__type": code, "message": message})


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
        start_response(response.status, response.headers)
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
            "ReceiveMessage": self._receive_message,
            "DeleteMessageBatch": self._delete_message_batch,
            "ChangeMessageVisibilityBatch": self._change_visibility_batch,
            "SendMessage": self._send_message,
            "SendMessageBatch": self._send_message_batch,
        }
        emulate = handlers.get(request.operation)
        if emulate is None or request.service not in {"states", "sqs"}:
            return self._forward(environ)
        return emulate(request, environ)

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
        if status == "RUNNING":
            document.pop("stopDate", None)
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


def backend_execution(arn: str) -> Any:
    """Moto's own record of an execution (same process as the server)."""
    from moto.stepfunctions.models import stepfunctions_backends  # noqa: PLC0415

    return stepfunctions_backends[ACCOUNT_ID][REGION].describe_execution(arn)
