"""The dispatcher function in the in-memory AWS: invocations, warm containers, the schedule, the refill rule.

Each invocation does what the handler does (reads the event, the limits, builds the
tick service) and runs the unchanged `Dispatcher` on the container's ports. A container
serves one invocation at a time and keeps its clients and warm reads; an invocation that
finds every container busy starts a new one (a cold start). Invoked asynchronously by
the schedule; the ends the refill rule matches either invoke it one event each (as up
to 0.5) or go to the end-event queue, which an event source mapping hands to it in
batches (`EventSourceMapping`, as the template configures it). Lambda's own concurrency
limit and event age are not modelled (no invocation is throttled or dropped).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dispatcher.core.batching import SQS_BATCH_LIMIT
from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS, Control
from dispatcher.core.events import end_news, refill_pattern, wake_deadline
from dispatcher.core.quotas import SSM_GET_PARAMETER
from dispatcher.local.events import matches, sqs_event
from dispatcher.settings import Settings
from dispatcher.telemetry import logger
from dispatcher.tick.invocation import dispatcher_for, steered
from dispatcher.tick.ports import Runtime
from dispatcher.tick.warm import WarmState
from dispatcher.waking import Waker
from tests.support.crashes import Crash, CrashPlan
from tests.support.sim.api import LiveBucket
from tests.support.sim.aws import Clients, InMemoryAws
from tests.support.sim.scheduler import SimPool

TIMEOUT_SECONDS = 60.0
MEMORY_MB = 256
"""The template's function."""
SCHEDULED_EVENT = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}


@dataclass
class Container:
    """One warm Lambda container: its clients, its warm reads, its cached control parameter."""

    clients: Clients
    warm: WarmState = field(default_factory=WarmState)
    control_read_at: float | None = None
    control: Control | None = None
    """The control parameter's value as this container last read it (Powertools' cache)."""


@dataclass(frozen=True)
class EventSourceMapping:
    """The end-event queue's event source mapping (the template's `EndEventMapping`).

    A batch is invoked once ``batch_size`` ends wait, or ``window_seconds`` after the
    oldest one arrived, while fewer than ``max_concurrency`` of its invocations run.
    The mapping's pollers receive and delete 10 messages a call.
    """

    batch_size: int = 100
    window_seconds: float = 1.0
    max_concurrency: int = 2


@dataclass(frozen=True)
class Invocation:
    """One invocation: when it ran, what triggered it, what it reported (None: it raised, or died)."""

    began: float
    ended: float
    trigger: str
    cold: bool
    report: dict[str, Any] | None
    crashed: bool = False


class Function:
    """The deployed function, invoked asynchronously by the schedule and the refill rule."""

    def __init__(
        self,
        aws: InMemoryAws,
        settings: Settings,
        *,
        refill: bool = True,
        mapping: EventSourceMapping | None = None,
    ) -> None:
        self._aws = aws
        self.settings = settings
        self.mapping = mapping
        self._ends: list[tuple[float, str]] = []
        """The end-event queue: (arrived at, body) of each end waiting for a batch."""
        self._batches_running = 0
        self._flush_at: float | None = None
        self.ends_delivered = 0
        """Status change events the refill rule matched (each end, and each duplicate of one)."""
        self.releases_sent = 0
        """Releases gated workflows sent to the end-event queue."""
        self.wakes_sent = 0
        """Producers' wakes sent to the end-event queue (their `WAKE_QUEUE_URL`)."""
        self.end_queue_requests: Counter[str] = Counter()
        """Requests on the end-event queue (standard): EventBridge sends, the mapping receives and deletes."""
        self._idle: list[Container] = []
        self.invocations: list[Invocation] = []
        self.errors: list[BaseException] = []
        self.containers = 0
        self._ssm = LiveBucket.of(SSM_GET_PARAMETER, aws.scheduler.now)
        self.crash_plan: Callable[[str], CrashPlan | None] = lambda trigger: None
        """Where the invocation a trigger ("schedule" or "event") starts dies, if anywhere."""
        if refill:
            pattern = refill_pattern(settings.topology().watched_machines)
            deliver = self.invoke if mapping is None else self._enqueue_end

            def on_event(event: dict[str, Any]) -> None:
                if matches(pattern, event):
                    self.ends_delivered += 1
                    deliver(event)

            aws.subscribers.append(on_event)

    def invoke(self, event: dict[str, Any], done: Callable[[], None] | None = None) -> None:
        """An asynchronous invocation: it runs from now, in a container of its own."""
        trigger = "event" if event.get("detail") or event.get("Records") else "schedule"

        def run() -> None:
            self._run(event, trigger)
            if done is not None:
                done()

        self._aws.scheduler.spawn(run, f"invocation-{len(self.invocations)}")

    # -- the end-event queue and its event source mapping ------------------------------

    def _enqueue_end(self, event: dict[str, Any]) -> None:
        """EventBridge's `SendMessage` of one end to the end-event queue."""
        self.end_queue_requests["SendMessage"] += 1
        self._ends.append((self._aws.scheduler.now, json.dumps(event)))
        self._flush()

    def release(self, gate: str, execution_arn: str) -> None:
        """A gated workflow's `SendMessage` of its release to the end-event queue (the template's path)."""
        assert self.mapping is not None, "releases go through the end-event queue"
        self._enqueue_end({"release": execution_arn, "gate": gate})
        self.releases_sent += 1

    def wake(self, body: str) -> None:
        """A producer's `SendMessage` of its wake to the end-event queue (the template's `WakeQueueUrl`)."""
        assert self.mapping is not None, "wakes go through the end-event queue"
        self._enqueue_end(json.loads(body))
        self.wakes_sent += 1

    def waker(self) -> Waker:
        """A producer's own `Waker` (the client's: at most one wake a second), on the virtual clock."""
        return Waker(WakeQueue(self), WAKE_QUEUE_URL, clock=lambda: self._aws.scheduler.now)  # type: ignore[arg-type]

    def _flush(self) -> None:
        """Invoke the batches that are due, as far as the mapping's concurrency allows."""
        assert self.mapping is not None
        scheduler = self._aws.scheduler
        mapping = self.mapping
        while self._ends and self._batches_running < mapping.max_concurrency:
            due = self._ends[0][0] + mapping.window_seconds
            if len(self._ends) < mapping.batch_size and scheduler.now < due:
                if self._flush_at is None or self._flush_at > due:
                    self._flush_at = due
                    scheduler.call_at(due, self._timer)
                return
            bodies = [body for _, body in self._ends[: mapping.batch_size]]
            sent = [arrived for arrived, _ in self._ends[: mapping.batch_size]]
            del self._ends[: mapping.batch_size]
            calls = -(-len(bodies) // SQS_BATCH_LIMIT)
            self.end_queue_requests["ReceiveMessage"] += calls
            self.end_queue_requests["DeleteMessageBatch"] += calls
            self._batches_running += 1
            self.invoke(sqs_event(bodies, sent_at=sent), done=self._batch_done)

    def _timer(self) -> None:
        self._flush_at = None
        self._flush()

    def _batch_done(self) -> None:
        self._batches_running -= 1
        self._flush()

    def schedule(self, every_seconds: float, until: float) -> None:
        """The EventBridge schedule: an invocation now, and every ``every_seconds`` until ``until``."""
        scheduler = self._aws.scheduler

        def tick() -> None:
            self.invoke(SCHEDULED_EVENT)
            if scheduler.now + every_seconds < until:
                scheduler.call_at(scheduler.now + every_seconds, tick)

        scheduler.call_at(scheduler.now, tick)

    def _run(self, event: dict[str, Any], trigger: str) -> None:
        scheduler = self._aws.scheduler
        cold = not self._idle
        container = self._idle.pop() if self._idle else self._new_container()
        began = scheduler.now
        deadline = began + TIMEOUT_SECONDS
        report: dict[str, Any] | None = None
        process = container.clients.process
        process.plan, process.seen = self.crash_plan(trigger), Counter()
        try:
            self._read_control(container)
            topology = steered(self.settings, container.control)
            runtime = Runtime(
                clock=lambda: scheduler.now,
                sleep=scheduler.sleep,
                remaining_seconds=lambda: deadline - scheduler.now,
                pool=lambda width: contextlib.nullcontext(SimPool(scheduler, width)),
            )
            dispatcher = dispatcher_for(
                self.settings,
                topology=topology,
                resources=self._aws.resources(
                    container.clients,
                    wait_seconds=self.settings.receive_wait_seconds,
                    kept=container.warm.rosters,
                ),
                runtime=runtime,
                warm=container.warm,
                control=lambda: self._control_of(container),
            )
            news = end_news(event, topology.watched_machines, scheduler.now)
            wake_until = None if news.records is None else wake_deadline(news.wakes)  # as the handler
            report = dispatcher.run(news.ended, news.releases, wake_until).as_dict()
        except Crash:  # the process died: its container is gone, the next invocation is a cold start
            self.invocations.append(Invocation(began, scheduler.now, trigger, cold, None, crashed=True))
            return
        except Exception as error:  # Lambda records a function error; the next invocation comes anyway
            self.errors.append(error)
        self.invocations.append(Invocation(began, scheduler.now, trigger, cold, report))
        self._idle.append(container)

    def _new_container(self) -> Container:
        self.containers += 1
        return Container(self._aws.clients())

    def _control_of(self, container: Container) -> Control | None:
        """The control parameter's value for a later tick of an invocation (through the cache)."""
        self._read_control(container)
        return container.control

    def _read_control(self, container: Container) -> None:
        """`GetParameter` through Powertools' cache: once per container every 5 s (`InMemoryAws.control`)."""
        if self.settings.control_parameter is None:
            return
        now = self._aws.scheduler.now
        if (
            container.control_read_at is not None
            and now - container.control_read_at < CONTROL_MAX_AGE_SECONDS
        ):
            return
        container.clients.ssm.call(
            "GetParameter",
            f"GetParameter({self.settings.control_parameter})",
            lambda: self._ssm.take(now) > 0,
        )
        container.control_read_at = now
        container.control = self._aws.control


WAKE_QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/dispatcher-end-events"


@dataclass(frozen=True)
class WakeQueue:
    """The end-event queue as a producer's `Waker` sees it: `SendMessage` only."""

    function: Function

    def send_message(self, *, QueueUrl: str, MessageBody: str) -> dict[str, Any]:  # noqa: N803 — boto3's names
        """Deliver the wake to the function's end-event queue."""
        assert QueueUrl == WAKE_QUEUE_URL
        self.function.wake(MessageBody)
        return {"MessageId": f"wake-{self.function.wakes_sent}"}


class CountingStream(io.TextIOBase):
    """A stream that counts what is written to it, and keeps none of it."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0

    def write(self, text: str) -> int:
        """Count ``text``."""
        self.bytes += len(text.encode())
        self.lines += text.count("\n")
        return len(text)


@contextlib.contextmanager
def counted_logs(level: str = "INFO") -> Iterator[CountingStream]:
    """The tick's log lines at ``level`` (the template's default, INFO) go to a counter, not a terminal."""
    stream = CountingStream()
    handlers = [handler for handler in logger.handlers if isinstance(handler, logging.StreamHandler)]
    saved_level = logger.log_level
    # Swapped, not `setStream`: that flushes the stream it replaces, which may be a stream an
    # earlier test's output capture already closed.
    saved = [handler.stream for handler in handlers]
    for handler in handlers:
        handler.stream = stream
    logger.setLevel(level)
    try:
        yield stream
    finally:
        for handler, previous in zip(handlers, saved, strict=True):
            handler.stream = previous
        logger.setLevel(saved_level)
