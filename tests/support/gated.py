"""A gate on moto's really running gated workflow, for the integration tests of gates."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dispatcher.core.events import RELEASE_KEY
from dispatcher.core.executions import execution_arn
from dispatcher.local.events import sqs_event
from dispatcher.local.gates import create_gate, create_release_queue
from tests.support.moto_harness import Harness

GATE = "crawl"
SETTLE_SECONDS = 20.0
LONG_SECONDS = 300
"""A Wait that outlasts a test: what holds a place keeps it."""


@dataclass
class Gated:
    """One gate of the harness's stack, its gated workflow, and what the test saw of it."""

    harness: Harness
    entry: dict[str, Any]
    release_queue_url: str
    admissions: list[tuple[float, str]] = field(default_factory=list)
    """(when, execution ARN) of every `SendTaskSuccess` the dispatcher made, accepted or not."""
    gates: set[str] = field(default_factory=lambda: {GATE})
    """The gates an admission may name (a test may configure one more)."""
    taken: list[dict[str, Any]] = field(default_factory=list)
    """End-event messages received and deleted, not yet handed to a tick."""

    @property
    def machine(self) -> str:
        """The gated workflow's state machine."""
        return str(self.entry["state_machine_arn"])

    def configure(self, max_concurrency: int, **gate: Any) -> None:
        """The function's environment with this gate in ``LANES`` (``gate``: its options)."""
        self.harness.configure(max_concurrency, lanes=json.dumps({"gates": [{**self.entry, **gate}]}))

    def start(self, name: str) -> str:
        """Start a gated execution (as its own producer does, not through the dispatcher)."""
        return str(
            self.harness.sfn.start_execution(stateMachineArn=self.machine, name=name, input="{}")[
                "executionArn"
            ]
        )

    def status(self, name: str) -> str:
        """What `DescribeExecution` says of one gated execution."""
        return str(
            self.harness.sfn.describe_execution(executionArn=execution_arn(self.machine, name))["status"]
        )

    def waiting(self) -> int:
        """Requests on the gate's queue (visible or in flight)."""
        return sum(self.harness.queue_counts(self.entry["queue_url"]))

    def wait_for_requests(self, count: int) -> None:
        """Until ``count`` executions sent their request (moto runs them on threads of its own)."""
        wait_until(lambda: self.waiting() >= count, f"{count} request(s) on the gate's queue")

    def releases(self) -> dict[str, Any] | None:
        """The end-event queue's messages so far (the sample's wakes and releases), as the mapping gives them.

        None: none. Messages a `wait_for_releases` took off the queue come first.
        """
        self._take()
        if not self.taken:
            return None
        event = sqs_event([message["Body"] for message in self.taken])
        for record, message in zip(event["Records"], self.taken, strict=True):
            record["attributes"]["SentTimestamp"] = message["Attributes"]["SentTimestamp"]
        self.taken = []
        return event

    def wait_for_releases(self, count: int) -> None:
        """Until ``count`` releases are on the end-event queue (the wakes before the requests not counted)."""
        wait_until(
            lambda: self._take() or sum(RELEASE_KEY in json.loads(m["Body"]) for m in self.taken) >= count,
            f"{count} release(s) on the end-event queue",
        )

    def _take(self) -> None:
        """Take what the end-event queue holds now into ``taken`` (received and deleted)."""
        messages = self.harness.sqs.receive_message(
            QueueUrl=self.release_queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
        ).get("Messages", [])
        for message in messages:
            self.harness.sqs.delete_message(
                QueueUrl=self.release_queue_url, ReceiptHandle=message["ReceiptHandle"]
            )
        self.taken += messages

    def record_admissions(self) -> None:
        """Note each `SendTaskSuccess` the handler's clients make, checking its output on the way."""

        def hook(params: dict[str, Any], **_: Any) -> None:
            output = json.loads(params["output"])
            assert output["gate"] in self.gates
            assert output["admitted_at"].endswith("Z")
            self.admissions.append((time.time(), params["taskToken"]))

        self.harness.on("provide-client-params.states.SendTaskSuccess", hook)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = SETTLE_SECONDS) -> None:
    """Wait until ``condition`` holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.05)


def gate_on(harness: Harness, section_seconds: int = 1) -> Gated:
    """A gate on a sample gated workflow (no free part, a section of ``section_seconds``), in pool default."""
    release_url = create_release_queue(harness.stack.name)
    entry = create_gate(
        harness.stack.name,
        GATE,
        release_queue_url=release_url,
        free_seconds=0,
        section_seconds=section_seconds,
    )
    gate = Gated(harness, entry, release_url)
    gate.configure(2)
    gate.record_admissions()
    return gate


def release_times(event: dict[str, Any]) -> list[float]:
    """When each release of an end-event batch was sent (s since the epoch); its wakes left out."""
    return [
        int(record["attributes"]["SentTimestamp"]) / 1000
        for record in event["Records"]
        if RELEASE_KEY in json.loads(record["body"])
    ]
