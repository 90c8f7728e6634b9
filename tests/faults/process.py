"""The dispatcher's side: ticks of the real handler, crashes, and its AWS calls.

A tick is a cold start (clients rebuilt, nothing remembered) or a warm one (the same
container again: clients and warm reads kept), and is triggered by the schedule or by
a status change event.

A crash is simulated inside the dispatcher's own botocore clients: at the chosen step
a hook raises `Crash`, and from then on every request of that tick, from any of its
threads, raises it again before it is sent. No cleanup the dispatcher might attempt
reaches AWS, exactly as when Lambda kills the process. The next tick after a crash is
a cold start.

The same hooks watch each invocation's starts for invariant 6 (`StartWaves`): what a
round sends out before it knows starts succeed, and after one came back throttled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import boto3
import botocore.retries.adaptive
import botocore.retries.standard

from dispatcher import handler
from dispatcher.adapters.gate_items import CONFIRMED_KIND
from dispatcher.adapters.item_keys import INSIDE_KIND
from dispatcher.adapters.lane_roster_items import GONE_KIND, HEAD_KIND
from dispatcher.adapters.state_items import ENDS_KIND, VOID_KIND
from dispatcher.in_process import LocalContext
from tests.faults.back_pressure import StartWaves
from tests.support.crashes import Crash, CrashPlan
from tests.support.world import World

TICK_SECONDS = 30.0
"""An invocation's time, as its context tells the handler (a lease is held at most this long)."""
SERVICE_PREFIX = {"sfn": "states", "sqs": "sqs", "dynamodb": "dynamodb", "ssm": "ssm"}


MOTO_EXECUTION_THREAD = "(_execution_logic)"
"""The end of the name of the thread moto runs a state machine's execution on (its tasks' calls too)."""


def _moto_execution_thread() -> bool:
    """Whether this thread is one moto runs an execution's states on: the execution's, or one it made.

    moto runs a state on a thread of its own too (a `Parallel` branch, a state with a timeout):
    the gated sample workflow's wake, a branch beside its gate request, was counted as the
    function's call once in 2 fresh clones.
    """
    thread = threading.current_thread()
    target = getattr(thread, "_target", None)  # set while the thread runs
    module = str(getattr(target, "__module__", "") or "")
    return thread.name.endswith(MOTO_EXECUTION_THREAD) or module.startswith("moto.stepfunctions")


@dataclass(frozen=True)
class Call:
    """One AWS API call the runtime made, and the resource it named."""

    action: str
    resource: str


def _resource(params: dict[str, Any]) -> str:
    for key in ("QueueUrl", "executionArn", "stateMachineArn", "TableName", "Name"):
        if key in params:
            return str(params[key])
    if "RequestItems" in params:
        return ",".join(sorted(params["RequestItems"]))
    return ""


def _label(model: Any, params: dict[str, Any]) -> str:
    """``service.Operation``, and what a write is for.

    A BatchWriteItem records, forgets or notes ends; a PutItem takes the lease, confirms a
    gate's admissions or writes a lane roster's head; a DeleteItem of a gate's admission is a
    release.
    """
    service = model.service_model.service_id.hyphenize()
    label = f"{SERVICE_PREFIX.get(service, service)}.{model.name}"
    if model.name == "PutItem":
        kind = params.get("Item", {}).get("kind", {}).get("S")
        label += {CONFIRMED_KIND: ":confirm", HEAD_KIND: ":head"}.get(kind or "", ":lease")
    if model.name == "DeleteItem" and params.get("Key", {}).get("pk", {}).get("S", "").startswith(
        INSIDE_KIND
    ):
        label += ":release"
    if model.name == "BatchWriteItem":
        requests = [request for batch in params.get("RequestItems", {}).values() for request in batch]
        items = [request.get("PutRequest", {}).get("Item", {}) for request in requests]
        kinds = {item.get("kind", {}).get("S") for item in items}
        deletes = any("DeleteRequest" in request for request in requests)
        forgets = VOID_KIND in kinds or GONE_KIND in kinds or deletes
        label += ":end" if ENDS_KIND in kinds else ":forget" if forgets else ":record"
    return label


@dataclass
class DispatcherProcess:
    """Runs ticks of the real handler, cold or warm, and can kill them at any step."""

    clock: Callable[[], float] | None = None
    """The world's clock: the invocation's deadline and the moments of its starts are on it."""
    calls: set[Call] = field(default_factory=set)
    starts: list[tuple[float, str, str]] = field(default_factory=list)
    """Every `StartExecution` call: (moment on ``clock``, state machine, execution name)."""
    violations: list[str] = field(default_factory=list)
    """Every tick's breaches of invariant 6 (`StartWaves`)."""
    largest_blind_wave: int = 0
    """The most starts a round of any tick began before one came back."""
    waves: StartWaves = field(default_factory=StartWaves)
    crash: CrashPlan | None = None
    crashed: bool = False
    act: tuple[str, str, int, Callable[[], None]] | None = None
    """Something the world does at one call of the tick in flight (operation, when, nth, what): once."""
    _seen: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _current: threading.local = field(default_factory=threading.local)

    def install(self) -> DispatcherProcess:
        """Hook boto3's default session, from which the handler builds its clients."""
        boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
        assert session is not None
        session.events.register("before-parameter-build", self._record)
        session.events.register("before-call", self._before)
        session.events.register("after-call", self._after)
        return self

    def _record(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        service = model.service_model.service_id.hyphenize()
        self._current.label = _label(model, params)
        if service not in SERVICE_PREFIX:
            return  # not a service the dispatcher calls: a test's own setup on the same session
        if _moto_execution_thread():
            return  # a sample workflow's own call (its role's, not the function's): moto runs it here
        with self._lock:
            self.calls.add(Call(f"{SERVICE_PREFIX[service]}:{model.name}", _resource(params)))
            if model.name == "StartExecution" and self.clock is not None:
                self.starts.append(
                    (self.clock(), str(params.get("stateMachineArn")), str(params.get("name")))
                )

    def _before(self, model: Any, **_: Any) -> None:
        operation = self._current.label
        with self._lock:
            if self.crashed:
                raise Crash(f"request {operation} after the process died")
            self._seen[operation] = self._seen.get(operation, 0) + 1
            self._current.nth = self._seen[operation]
            self.waves.before(operation)
            act = self._due(operation, "before", self._current.nth)
        if act is not None:
            act()
        with self._lock:
            self._maybe_crash(operation, "before", self._current.nth)

    def _after(self, model: Any, http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.waves.after(self._current.label, http_response, parsed)
            act = self._due(self._current.label, "after", self._current.nth)
        if act is not None:
            act()
        with self._lock:
            self._maybe_crash(self._current.label, "after", self._current.nth)

    def _due(self, operation: str, when: str, nth: int) -> Callable[[], None] | None:
        """The world's act planned at this call, taken (it runs once, outside the lock)."""
        if self.act is None or self.act[:3] != (operation, when, nth):
            return None
        act, self.act = self.act[3], None
        return act

    def _maybe_crash(self, operation: str, when: str, nth: int) -> None:
        """Die at the planned step; ``nth`` counts calls of the operation in the order they were sent."""
        plan = self.crash
        if plan and plan.operation == operation and plan.when == when and nth == plan.nth:
            self.crashed = True
            raise Crash(str(plan))

    def tick(
        self,
        *,
        event: Any = None,
        cold: bool = True,
        crash: CrashPlan | None = None,
        deadline_after: int | None = None,
    ) -> dict[str, Any] | None:
        """One invocation (a cold start unless ``cold`` is False); None when it crashed as planned."""
        self.crash, self.crashed, self._seen = crash, False, {}
        self.waves = StartWaves()
        if cold:
            handler.reset_clients()
        if deadline_after is not None:
            context: LocalContext = ShortContext(deadline_after)
        elif self.clock is not None:
            context = VirtualContext(self.clock)
        else:
            context = LocalContext()
        try:
            result = handler.lambda_handler({} if event is None else event, context)
        except Crash:
            handler.reset_clients()  # the process died: whatever runs next is a cold start
            return None
        finally:
            self.crash = None
            self.violations += self.waves.violations
            self.largest_blind_wave = max(self.largest_blind_wave, self.waves.largest_blind_wave)
        assert isinstance(result, dict)
        return result


class VirtualContext(LocalContext):
    """A context whose deadline is on the world's clock: a tick that waits runs out of time as in Lambda.

    A keeper that keeps ticking (a lane waiting for its rate's next token, a loop) sleeps
    on the virtual clock; with a deadline on the real one it would go on for the real
    seconds left, hundreds of virtual ticks.
    """

    def __init__(self, clock: Callable[[], float], timeout_seconds: float = TICK_SECONDS) -> None:
        super().__init__(timeout_seconds)
        self._clock = clock
        self._deadline_at = clock() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left on the world's clock."""
        return max(0, int((self._deadline_at - self._clock()) * 1000))


class ShortContext(LocalContext):
    """A context whose remaining time drops below any margin after ``checks`` reads."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self._checks = checks

    def get_remaining_time_in_millis(self) -> int:
        """Plenty of time for the first ``checks`` reads, then one second."""
        self._checks -= 1
        return 30_000 if self._checks >= 0 else 1_000


@contextmanager
def on_virtual_time(world: World, sleep: Callable[[float], None] | None = None) -> Iterator[None]:
    """Give the handler the world's clock, and take botocore's waiting out.

    Retries still happen (so an injected throttle is usually absorbed, as in AWS), and
    adaptive mode still measures its rate; only the waiting between attempts and before
    a rate-limited send is skipped, because time is what the virtual clock is for. A
    looping invocation's ``sleep`` moves the virtual clock (the run passes it in).
    """
    saved_time = handler.time
    saved_delay = botocore.retries.standard.ExponentialBackoff.delay_amount
    saved_send = botocore.retries.adaptive.ClientRateLimiter.on_sending_request
    handler.time = SimpleNamespace(time=world.time, sleep=sleep or (lambda seconds: None))  # type: ignore[assignment]
    botocore.retries.standard.ExponentialBackoff.delay_amount = lambda self, context: 0.0  # type: ignore[method-assign]
    botocore.retries.adaptive.ClientRateLimiter.on_sending_request = lambda self, request, **_: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        handler.time = saved_time
        botocore.retries.standard.ExponentialBackoff.delay_amount = saved_delay  # type: ignore[method-assign]
        botocore.retries.adaptive.ClientRateLimiter.on_sending_request = saved_send  # type: ignore[method-assign]
