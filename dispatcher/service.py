"""One tick of the dispatcher: read ports → plan → act → report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from dispatcher.adapters.dynamodb import RecentStarts
from dispatcher.adapters.sqs import DeadLetterQueue, SourceQueue
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.errors import ConfigurationError, ExecutionExistsError, RejectedInputError, TransientError
from dispatcher.models import QueuedMessage
from dispatcher.planning import (
    RECENT_START_WINDOW_SECONDS,
    DeadLetter,
    GroupOrder,
    free_slots,
    plan_message,
    receive_size,
    review_recent_starts,
    still_counts,
)
from dispatcher.telemetry import logger


@dataclass
class TickReport:
    """What one tick saw and did; its dict is the handler's return value."""

    running: int = 0
    free: int = 0
    started: int = 0
    already_started: int = 0
    dead_lettered: int = 0
    released: int = 0
    delete_failures: int = 0
    stopped: str = ""
    """Why admission ended: paused, capacity, drained, throttled or time."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON-serialisable return value of the handler."""
        return asdict(self)


@dataclass
class BatchOutcome:
    """What became of one received batch."""

    started: list[QueuedMessage] = field(default_factory=list)
    already_started: list[QueuedMessage] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    held_back: list[QueuedMessage] = field(default_factory=list)
    stop_reason: str | None = None


class Dispatcher:
    """Starts at most ``MAX_CONCURRENCY - RUNNING`` executions per tick, in group order."""

    def __init__(  # noqa: PLR0913 — each port is a separate, injected collaborator
        self,
        *,
        max_concurrency: int,
        state_machine: StateMachine,
        queue: SourceQueue,
        dead_letter_queue: DeadLetterQueue,
        recent_starts: RecentStarts,
        remaining_seconds: Callable[[], float],
        time_margin_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self._max = max_concurrency
        self._state_machine = state_machine
        self._queue = queue
        self._dead_letter_queue = dead_letter_queue
        self._recent_starts = recent_starts
        self._remaining_seconds = remaining_seconds
        self._time_margin = time_margin_seconds
        self._clock = clock

    def tick(self) -> TickReport:
        """Count RUNNING, then admit up to the free slots from the queue."""
        report = TickReport()
        if self._max == 0:
            report.stopped = "paused"
            logger.info("paused: MAX_CONCURRENCY is 0, nothing starts")
            return report
        try:
            self._state_machine.ensure_standard()
            report.running = self.count_running()
        except TransientError as error:
            # Without a count nothing may start; the next tick tries again.
            report.stopped = "throttled"
            logger.warning("could not count RUNNING executions", extra={"reason": str(error)})
            return report
        free = report.free = free_slots(self._max, report.running)
        logger.info("capacity", extra={"running": report.running, "free": free, "max": self._max})
        report.stopped = "capacity"
        while free > 0:
            if self._remaining_seconds() < self._time_margin:
                report.stopped = "time"
                break
            try:
                messages = self._queue.receive(receive_size(free))
            except TransientError as error:
                report.stopped = "throttled"
                logger.warning("could not receive", extra={"reason": str(error)})
                break
            if not messages:
                report.stopped = "drained"
                break
            outcome = self._admit(messages, free)
            free -= len(outcome.started)
            self._settle(outcome, report)
            if outcome.stop_reason is not None:
                report.stopped = "throttled"
                logger.warning("stopped admitting", extra={"reason": outcome.stop_reason})
                break
        return report

    def count_running(self) -> int:
        """RUNNING executions, including recorded starts the list doesn't show yet."""
        listed = self._state_machine.count_running(self._max)
        if not listed.complete or listed.count >= self._max:
            return listed.count
        now = self._clock()
        recorded = self._recent_starts.since(now - RECENT_START_WINDOW_SECONDS)
        review = review_recent_starts(recorded, listed, now)
        resolved = list(review.resolved)
        unlisted = 0
        for record in review.to_check:
            if listed.count + unlisted >= self._max:
                break
            status = self._state_machine.status_of(record.name)
            if still_counts(status, record, now):
                unlisted += 1
            else:
                resolved.append(record)
        if resolved:
            self._recent_starts.forget(resolved)
        if unlisted:
            logger.info("counting recorded starts not listed yet", extra={"unlisted": unlisted})
        return listed.count + unlisted

    def _admit(self, messages: list[QueuedMessage], free: int) -> BatchOutcome:
        """Decide and start each message of a batch, in receive order."""
        outcome = BatchOutcome()
        order = GroupOrder()
        try:
            for message in messages:
                if outcome.stop_reason or len(outcome.started) >= free or not order.may_start(message):
                    order.hold_back(message)
                    outcome.held_back.append(message)
                    continue
                try:
                    self._start(message, outcome)
                except TransientError as error:
                    outcome.stop_reason = str(error)
                    order.hold_back(message)
                    outcome.held_back.append(message)
            failed = self._dead_letter_queue.send(outcome.dead_letters)
        except BaseException:
            # A configuration error or a bug: every message of the batch stays queued.
            self._queue.release(messages)
            raise
        for letter in failed:
            outcome.dead_letters.remove(letter)
            outcome.held_back.append(letter.message)
        if failed:
            # Released poison would be received again at once: stop until the next tick.
            outcome.stop_reason = f"the dead-letter queue refused {len(failed)} message(s)"
        return outcome

    def _start(self, message: QueuedMessage, outcome: BatchOutcome) -> None:
        decision = plan_message(message)
        if isinstance(decision, DeadLetter):
            outcome.dead_letters.append(decision)
            return
        name = decision.name
        self._recent_starts.record(name, self._clock())
        try:
            self._state_machine.start(name, message.body)
        except ExecutionExistsError:
            if self._state_machine.has_input(name, message.body):
                outcome.already_started.append(message)
                logger.info("already started", extra={"execution": name, "message_id": message.message_id})
            else:
                outcome.dead_letters.append(
                    DeadLetter(
                        message,
                        f"name collision: execution {name!r} already exists with a different input",
                    )
                )
            return
        except RejectedInputError as error:
            outcome.dead_letters.append(DeadLetter(message, str(error)))
            return
        outcome.started.append(message)
        logger.info(
            "started",
            extra={"execution": name, "message_id": message.message_id, "group": message.group_id},
        )

    def _settle(self, outcome: BatchOutcome, report: TickReport) -> None:
        """Delete what is done, release what waits, and count both."""
        for letter in outcome.dead_letters:
            logger.warning(
                "dead-lettered",
                extra={"message_id": letter.message.message_id, "reason": letter.reason},
            )
        done = outcome.started + outcome.already_started + [letter.message for letter in outcome.dead_letters]
        try:
            failed_deletes = self._queue.delete(done)
        except ConfigurationError:
            # Nothing can be deleted: let every message of the batch come back now. The
            # started ones are found already started, the poison is dead-lettered again
            # under the same deduplication id.
            self._queue.release(outcome.held_back + done)
            raise
        if failed_deletes:
            logger.warning(
                "delete failed; the messages will be redelivered and found already started",
                extra={"message_ids": [message.message_id for message in failed_deletes]},
            )
        self._queue.release(outcome.held_back)
        report.started += len(outcome.started)
        report.already_started += len(outcome.already_started)
        report.dead_lettered += len(outcome.dead_letters)
        report.released += len(outcome.held_back)
        report.delete_failures += len(failed_deletes)
