"""The end-event queue and its event source mapping, as the fault harness delivers them.

The refill rule sends each status change event to an SQS queue; an event source mapping
invokes the function with batches of them. moto runs no event source mapping, so the
harness builds the batches from the world's due events (already lost, doubled or late as
the `EventPlan` says), and then loses a whole batch, delivers one again later, or mixes in
a record that is not an end of the state machine.
"""

from __future__ import annotations

import json
import random
from typing import Any

from dispatcher.core.events import is_sqs_batch
from dispatcher.local.events import sqs_event
from tests.support.runs import Execution, execution_event
from tests.support.world import World

REDELIVERY_SECONDS = (1.0, 30.0, 90.0)
"""When a doubled batch comes again: soon, after a visibility timeout, past the list's lag."""


class EndEventBatches:
    """Turns the events due now into the invocations an event source mapping would make."""

    def __init__(self, world: World, rng: random.Random, state_machine_arn: str) -> None:
        self._world = world
        self._rng = rng
        self._machine = state_machine_arn

    def invocations(self, due: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One event per invocation: each due event alone, or batches of them."""
        plan = self._world.events
        if plan.batch_size == 0:
            return due
        again = [event for event in due if is_sqs_batch(event)]
        fresh = [event for event in due if not is_sqs_batch(event)]
        batches: list[dict[str, Any]] = []
        for start in range(0, len(fresh), plan.batch_size):
            events = fresh[start : start + plan.batch_size]
            # When each was sent, on the world's clock: a release says when (a gate's test
            # of an early or late one rests on it), an end was sent as it came.
            sent = [float(event.get("sentAt", self._world.now)) for event in events]
            bodies = [json.dumps(event) for event in events]
            if self._rng.random() < plan.malformed:
                at = self._rng.randint(0, len(bodies))
                bodies.insert(at, self._not_an_end())
                sent.insert(at, self._world.now)
            batch = sqs_event(bodies, sent_at=sent)
            if self._rng.random() < plan.batch_lost:
                self._world.injected["end event batch lost"] += 1
                continue
            if self._rng.random() < plan.batch_doubled:
                self._world.injected["end event batch delivered twice"] += 1
                self._world.deliver_later(batch, self._rng.choice(REDELIVERY_SECONDS))
            batches.append(batch)
        return again + batches

    def _not_an_end(self) -> str:
        """A record the function must skip: not JSON, another machine's end, or a RUNNING change."""
        self._world.injected["end event batch with a record that is not an end"] += 1
        running = [execution for execution in self._world.running() if execution.by_dispatcher]
        kind = self._rng.choice(["text", "other machine", "running"] if running else ["text"])
        if kind == "text":
            return "not a status change event"
        execution: Execution = self._rng.choice(running)
        if kind == "other machine":
            event = execution_event(execution, "SUCCEEDED", self._machine + "-other")
            event["detail"]["stopDate"] = int(self._world.now * 1000)
        else:
            event = execution_event(execution, "RUNNING")
        return json.dumps(event)
