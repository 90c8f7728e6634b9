"""The benchmark's AWS: moto's server behind the fault harness's world, behind `Wire`.

`Wire` is a WSGI middleware that gives every request of a system under test (the
dispatcher or a baseline, told apart by user agent) the same simulated network
latency, counts those requests by operation, and can hold `StartExecution` to a token
bucket shaped like AWS's quota. Behind it, the fault harness's `FaultyAws` supplies
what moto lacks, on the real clock: `ListExecutions` lag, execution ends on schedule,
and status change events. Requests of the benchmark's own driver pass untouched.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dispatcher.local.server import moto_server
from tests.support.exchanges import SERVICE_BY_TARGET
from tests.support.faulty_aws import FaultyAws
from tests.support.plans import EventPlan, FaultPlan, Lag
from tests.support.world import World

SYSTEMS = ("naive", "list-only", "dispatcher")
"""User agent markers, most specific first: baselines carry "dispatcher bench-<name>"."""


def system_of(user_agent: str) -> str | None:
    """Which system under test sent a request (None: the benchmark's own driver)."""
    for system in SYSTEMS[:-1]:
        if f"bench-{system}" in user_agent:
            return system
    return "dispatcher" if "dispatcher" in user_agent else None


@dataclass
class TokenBucket:
    """AWS's quota shape: ``capacity`` tokens, refilled at ``rate`` per second; a call takes one."""

    capacity: float
    rate: float
    tokens: float = -1.0
    updated: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.tokens = self.capacity

    def take(self) -> bool:
        """Take a token if there is one."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            return False


@dataclass
class Wire:
    """WSGI middleware: latency, call counts and a StartExecution quota for the systems under test."""

    app: Callable[..., Any]
    latency: float = 0.0
    start_bucket: TokenBucket | None = None
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    throttled: int = 0
    log: list[tuple[float, str, str]] = field(default_factory=list)
    """(time, system, operation) of every counted call."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Delay, count and maybe throttle one request, then pass it on."""
        system = system_of(environ.get("HTTP_USER_AGENT", ""))
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        service, _, operation = target.partition(".")
        if system is None or service not in SERVICE_BY_TARGET:
            return self.app(environ, start_response)
        if self.latency:
            time.sleep(self.latency)
        with self.lock:
            self.calls[(system, operation)] += 1
            self.log.append((time.time(), system, operation))
        if operation == "StartExecution" and self.start_bucket is not None and not self.start_bucket.take():
            with self.lock:
                self.throttled += 1
                self.log.append((time.time(), system, "StartExecution throttled"))
            body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
            start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.0")])
            return [body]
        return self.app(environ, start_response)

    def count(self, system: str) -> Counter[str]:
        """Calls a system made, by operation."""
        with self.lock:
            return Counter({op: n for (who, op), n in self.calls.items() if who == system})

    def reset(self) -> None:
        """Forget the counts (between measurements)."""
        with self.lock:
            self.calls.clear()
            self.log.clear()
            self.throttled = 0


@dataclass
class Emulator:
    """The running emulator: its endpoint, the world on the real clock, and the wire."""

    endpoint_url: str
    world: World
    wire: Wire


@contextmanager
def emulator(
    *,
    latency: float = 0.0,
    lag: Lag | None = None,
    events: EventPlan | None = None,
    start_bucket: TokenBucket | None = None,
    seed: int = 0,
) -> Iterator[Emulator]:
    """Start moto's server behind the world (real clock) and the wire; yield them."""
    made: list[Wire] = []
    harness: list[FaultyAws] = []

    def wrap(app: Callable[..., Any]) -> Wire:
        faulty = FaultyAws(app)
        faulty.world = World(
            seed=seed,
            start=0.0,
            faults=FaultPlan(lag=lag or Lag(), enabled=False),
            events=events or EventPlan(),
            clock=time.time,
        )
        harness.append(faulty)
        made.append(Wire(faulty, latency=latency, start_bucket=start_bucket))
        return made[0]

    with moto_server(execute=False, wrap=wrap, loopback=False) as endpoint_url:
        yield Emulator(endpoint_url, harness[0].world, made[0])


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Swallow the handler's EMF lines on standard output."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


@contextmanager
def fast_sqs() -> Iterator[None]:
    """Make moto's SQS hold a 10,000-message backlog (in this process only).

    moto recomputes every queue attribute, each one a scan of the queue that converts
    timestamps through `datetime`, several times for every message sent and received,
    and rebuilds the message list for every delete. That makes a backlog of n cost
    O(n²) with a large constant (sending 3,000 messages: 16 s). The benchmark does
    not read those approximate counts, so here they are 0, time is read with
    `time.time`, and a delete removes the one message it names.
    """
    import moto.sqs.models as sqs_models  # noqa: PLC0415 — the emulator is local-only

    queue = sqs_models.Queue
    saved = {
        "unix_time": sqs_models.unix_time,
        "unix_time_millis": sqs_models.unix_time_millis,
    }
    saved_queue = {
        name: queue.__dict__[name]
        for name in (
            "approximate_number_of_messages",
            "approximate_number_of_messages_not_visible",
            "approximate_number_of_messages_delayed",
            "delete_message",
        )
    }

    def delete_message(self: Any, receipt_handle: str) -> None:
        if receipt_handle in self.deleted_messages:
            return
        for index, message in enumerate(self._messages):
            if message.had_receipt_handle(receipt_handle):
                del self._messages[index]
                self.pending_messages.discard(message)
                self.deleted_messages.update(message.all_receipt_handles)
                return
        raise sqs_models.ReceiptHandleIsInvalid()

    sqs_models.unix_time = lambda dt=None: time.time()
    sqs_models.unix_time_millis = lambda dt=None: time.time() * 1000.0
    for name in list(saved_queue)[:3]:
        setattr(queue, name, property(lambda self: 0))
    queue.delete_message = delete_message
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(sqs_models, name, value)
        for name, value in saved_queue.items():
            setattr(queue, name, value)
