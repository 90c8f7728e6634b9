"""What every benchmark does: set up a stack, fill the queue, invoke the real handler."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from benchmarks.wire import Emulator, quiet
from dispatcher.in_process import LocalContext
from dispatcher.local.account import REGION
from dispatcher.local.events import sqs_event
from dispatcher.local.stack import Stack, create_stack
from tests.support.faulty_aws import backend_execution
from tests.support.runs import Execution

LAMBDA_TIMEOUT_SECONDS = 60.0
TIME_MARGIN_SECONDS = 15.0
"""The template's function timeout and margin: one tick admits for at most 45 s."""

QUIET_ENVIRONMENT = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "CRITICAL",
}


def prepare_process() -> None:
    """Silence the handler's logs and metrics in this (benchmark) process."""
    os.environ.update(QUIET_ENVIRONMENT)
    warnings.simplefilter("ignore")


def send_backlog(stack: Stack, count: int, groups: int, body: Callable[[int], dict[str, Any]]) -> None:
    """Enqueue ``count`` jobs round-robin over ``groups`` message groups, ten per call."""
    sqs = boto3.client("sqs", region_name=REGION)
    for first in range(0, count, 10):
        sqs.send_message_batch(
            QueueUrl=stack.queue_url,
            Entries=[
                {
                    "Id": str(index),
                    "MessageBody": json.dumps(body(index)),
                    "MessageGroupId": f"g{index % groups}",
                    "MessageDeduplicationId": uuid.uuid4().hex,
                }
                for index in range(first, min(count, first + 10))
            ],
        )


def queued(stack: Stack) -> int:
    """Messages still on the job queue (read from moto's own record: same process)."""
    from moto.sqs.models import sqs_backends  # noqa: PLC0415 — the emulator is local-only

    from dispatcher.local.account import ACCOUNT_ID  # noqa: PLC0415

    backend = sqs_backends[ACCOUNT_ID][REGION]
    return len(backend.get_queue(stack.queue_url.rsplit("/", 1)[-1])._messages)


@contextmanager
def dispatcher_environment(stack: Stack, max_concurrency: int, **settings: Any) -> Iterator[Any]:
    """The function's environment for ``stack``; yields the handler module, cold."""
    saved = dict(os.environ)
    os.environ.update(
        stack.environment(
            max_concurrency,
            receive_wait_seconds=0,
            time_margin_seconds=TIME_MARGIN_SECONDS,
            **settings,
        )
    )
    from dispatcher import handler  # noqa: PLC0415 — after the environment is set

    handler.reset_clients()
    try:
        yield handler
    finally:
        os.environ.clear()
        os.environ.update(saved)
        handler.reset_clients()


def invoke(handler: Any, event: Any = None, timeout: float = LAMBDA_TIMEOUT_SECONDS) -> dict[str, Any]:
    """One invocation of the real handler with a Lambda-sized deadline."""
    with quiet():
        result = handler.lambda_handler({} if event is None else event, LocalContext(timeout))
    if not isinstance(result, dict):
        raise TypeError(f"the handler returned {result!r}")
    return result


def fresh_stack(prefix: str) -> Stack:
    """The dispatcher's resources, named for one measurement."""
    return create_stack(f"{prefix}-{uuid.uuid4().hex[:6]}")


@dataclass
class Lambda:
    """The deployed function as EventBridge sees it: async invocations, one at a time.

    Reserved concurrency 1 runs invocations one after another in a warm container; an
    event older than the maximum event age (60 s) when its turn comes is dropped, as
    Lambda's async queue drops it.
    """

    handler: Any
    max_event_age: float = 60.0
    invocations: list[tuple[float, float, str]] = field(default_factory=list)
    """(start, end, trigger) of each invocation."""
    dropped: int = 0
    _queue: queue.Queue[tuple[float, Any] | None] = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None

    def invoke_async(self, event: Any) -> None:
        """Queue an invocation."""
        self._queue.put((time.time(), event))

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            queued_at, event = item
            if time.time() - queued_at > self.max_event_age:
                self.dropped += 1
                continue
            began = time.time()
            is_event = isinstance(event, dict) and ("detail-type" in event or "Records" in event)
            trigger = "event" if is_event else "schedule"
            with contextlib.suppress(Exception):
                invoke(self.handler, event)
            self.invocations.append((began, time.time(), trigger))

    def __enter__(self) -> Lambda:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join()


@dataclass
class EndEventMapping:
    """The end-event queue and its event source mapping, in real time (the template's `EndEventMapping`).

    Ends wait in the queue; a batch is invoked once ``batch_size`` wait, or
    ``window_seconds`` after the oldest came, as one SQS event of their bodies.
    """

    invoke: Callable[[dict[str, Any]], None]
    batch_size: int = 100
    window_seconds: float = 1.0
    poll_seconds: float = 0.02
    _waiting: list[tuple[float, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def deliver(self, event: dict[str, Any]) -> None:
        """The rule's target: the end-event queue."""
        with self._lock:
            self._waiting.append((time.time(), json.dumps(event)))
            if len(self._waiting) >= self.batch_size:
                self._flush()

    def _flush(self) -> None:
        batch, self._waiting = self._waiting[: self.batch_size], self._waiting[self.batch_size :]
        self.invoke(sqs_event([body for _, body in batch]))

    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            with self._lock:
                if self._waiting and time.time() - self._waiting[0][0] >= self.window_seconds:
                    self._flush()

    def __enter__(self) -> EndEventMapping:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@dataclass
class Clockwork:
    """Moves the world on the real clock: executions end when due, due events reach the function."""

    emulator: Emulator
    deliver: Callable[[dict[str, Any]], None]
    interval: float = 0.05
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _end(self, execution: Execution) -> None:
        record = backend_execution(execution.arn)
        record.status = "SUCCEEDED"

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.emulator.world.advance(0.0, self._end)
            for event in self.emulator.world.due_events():
                self.deliver(event)

    def __enter__(self) -> Clockwork:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
