"""One tick of the dispatcher: read ports → plan → act → report.

A tick counts RUNNING once, then admits messages in rounds: receive up to 100 in
batches of 10 (in parallel once the first comes back full), record their starts in
`BatchWriteItem` calls of 25, start them on a bounded pool of threads (one message
group per task, so each group starts in send order), dead-letter what can never
start, then delete and release in batches of 10.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from dispatcher.adapters.dynamodb import BATCH_WRITE_LIMIT, StateTable, TickLease
from dispatcher.adapters.sqs import SQS_MAX_BATCH, DeadLetterQueue, SourceQueue
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.errors import (
    ConfigurationError,
    ExecutionExistsError,
    NotYetError,
    RejectedInputError,
    TransientError,
)
from dispatcher.models import EndedExecution, QueuedMessage, RecordedStart
from dispatcher.planning import (
    RECENT_START_WINDOW_SECONDS,
    SQS_MAX_RECEIVE,
    DeadLetter,
    Start,
    admit,
    by_group,
    chunks,
    free_slots,
    latest_ends,
    plan_count,
    receive_size,
    redrive_decision,
    redrive_token,
    round_size,
    still_counts,
)
from dispatcher.telemetry import logger
from dispatcher.warm import WarmState

LOOP_INTERVAL_SECONDS = 1.0
WAITING = frozenset({"capacity", "throttled", "waiting"})
"""Stops after which jobs may still wait: a looping invocation ticks again (after a pause)."""

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class TickPolicy:
    """The limits one invocation works within (from the settings)."""

    max_concurrency: int
    paused: bool = False
    """The operator paused the dispatcher: nothing starts, nothing is lost."""
    time_margin_seconds: float = 10.0
    """Stop admitting when less Lambda time than this remains (one round of starts)."""
    start_concurrency: int = 10
    """Message groups started at once."""
    list_reuse_seconds: float = 1.0
    """A `ListExecutions` read is reused by later ticks of a warm container for this long."""
    loop_seconds: float = 0.0
    """Keep ticking for up to this long while jobs wait for slots; 0 is one tick."""


@dataclass
class TickReport:
    """What one invocation saw and did; its dict is the handler's return value."""

    running: int = 0
    """RUNNING counted before starting (by the first tick)."""
    free: int = 0
    started: int = 0
    """Executions started, and closed executions redriven (they run again)."""
    redriven: int = 0
    """Of ``started``: the redrives."""
    already_started: int = 0
    dead_lettered: int = 0
    released: int = 0
    delete_failures: int = 0
    stopped: str = ""
    """Why admission ended: paused, busy (another tick holds the lease), capacity, drained,
    throttled or time."""
    ticks: int = 1
    oldest_running_seconds: float | None = None
    """Age of the oldest execution the count saw RUNNING (when the listing was complete)."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON-serialisable return value of the handler."""
        return asdict(self)

    def add(self, later: TickReport) -> None:
        """Fold in a later tick of the same invocation."""
        self.started += later.started
        self.redriven += later.redriven
        self.already_started += later.already_started
        self.dead_lettered += later.dead_lettered
        self.released += later.released
        self.delete_failures += later.delete_failures
        self.stopped = later.stopped
        self.ticks += later.ticks
        if later.oldest_running_seconds is not None:
            self.oldest_running_seconds = later.oldest_running_seconds


@dataclass
class GroupOutcome:
    """What became of the starts of one message group in one round."""

    started: list[QueuedMessage] = field(default_factory=list)
    already_started: list[QueuedMessage] = field(default_factory=list)
    redriven: list[QueuedMessage] = field(default_factory=list)
    """Of ``started``: the redrives."""
    dead_letters: list[DeadLetter] = field(default_factory=list)
    held_back: list[QueuedMessage] = field(default_factory=list)
    attempted: set[str] = field(default_factory=set)
    """Names `StartExecution` was called for: their records must stay."""
    stop_reason: str | None = None


@dataclass
class RoundOutcome(GroupOutcome):
    """What became of one round of received messages."""

    recorded: list[RecordedStart] = field(default_factory=list)

    def merge(self, group: GroupOutcome) -> None:
        """Add one group's outcome."""
        self.started += group.started
        self.already_started += group.already_started
        self.redriven += group.redriven
        self.dead_letters += group.dead_letters
        self.held_back += group.held_back
        self.attempted |= group.attempted
        self.stop_reason = self.stop_reason or group.stop_reason

    def never_started(self) -> list[RecordedStart]:
        """Records of this round whose `StartExecution` was never called: they can go at once."""
        return [record for record in self.recorded if record.name not in self.attempted]


def settled(
    pool: Executor, call: Callable[[Item], Result], items: Sequence[Item]
) -> list[Result | BaseException]:
    """Run ``call`` on each item in the pool; once every one is done, its result or its exception.

    Waiting for all before looking at any failure matters: a failure must not be acted
    on (messages released, a tick stopped) while other calls of the batch are running.
    """
    futures = [pool.submit(call, item) for item in items]
    wait_for(futures)
    return [future.exception() or future.result() for future in futures]


def first_failure(results: Sequence[object]) -> BaseException | None:
    """The first exception among settled results."""
    return next((result for result in results if isinstance(result, BaseException)), None)


class Dispatcher:
    """Starts at most ``MAX_CONCURRENCY - RUNNING`` executions per tick, in group order."""

    def __init__(  # noqa: PLR0913 — each port is a separate, injected collaborator
        self,
        *,
        policy: TickPolicy,
        state_machine: StateMachine,
        queue: SourceQueue,
        dead_letter_queue: DeadLetterQueue,
        state_table: StateTable,
        lease: TickLease,
        remaining_seconds: Callable[[], float],
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        warm: WarmState | None = None,
    ) -> None:
        self._policy = policy
        self._max = policy.max_concurrency
        self._state_machine = state_machine
        self._queue = queue
        self._dead_letter_queue = dead_letter_queue
        self._state = state_table
        self._lease = lease
        self._remaining_seconds = remaining_seconds
        self._clock = clock
        self._sleep = sleep
        self._warm = warm or WarmState()

    def run(self, ended: EndedExecution | None = None) -> TickReport:
        """Tick while holding the lease; with a loop policy, more while jobs wait and time remains.

        Ticks never overlap: an invocation that can't take the lease notes the end it
        was told about, asks the holder for one more tick, and returns at once.
        """
        if self._policy.paused or self._max == 0:
            logger.info("paused: nothing starts", extra={"max": self._max, "paused": self._policy.paused})
            return TickReport(stopped="paused")
        if ended is not None:
            self._note_end(ended)
        owner = uuid.uuid4().hex
        try:
            if not self._take_lease(owner):
                return TickReport(stopped="busy")
        except TransientError as error:
            # The write may have been applied with its answer lost: let go, or it expires.
            logger.warning("could not take the tick lease", extra={"reason": str(error)})
            self._let_go_after_failure(owner)
            return TickReport(stopped="throttled")
        try:
            report = self._ticks(ended)
            self._hand_back(owner, report)
        except BaseException:
            self._let_go_after_failure(owner)
            raise
        return report

    def _hand_back(self, owner: str, report: TickReport) -> None:
        """Let go of the lease, first ticking again for each invocation that found it held.

        Those invocations came because an execution ended (or a tick was due): their
        news is in the state table, and one more tick here spends the slot it freed.
        """
        try:
            while not self._lease.release(owner):
                if not self._time_for_another_tick():
                    self._lease.let_go(owner)
                    return
                self._sleep(self._interval)
                report.add(self.tick())
        except TransientError as error:
            logger.warning(
                "could not let go of the tick lease: it expires with this invocation",
                extra={"reason": str(error)},
            )

    @property
    def _interval(self) -> float:
        return max(LOOP_INTERVAL_SECONDS, self._policy.list_reuse_seconds)

    def _time_for_another_tick(self) -> bool:
        return self._remaining_seconds() - self._interval > self._policy.time_margin_seconds

    def _take_lease(self, owner: str) -> bool:
        now = self._clock()
        held_until = now + self._remaining_seconds()
        if self._lease.acquire(owner, now, held_until):
            return True
        if self._lease.ask_again(owner, now):
            logger.info("another tick holds the lease: it will tick again for this one, which returns")
            return False
        # The holder let go between the two calls.
        if self._lease.acquire(owner, now, held_until):
            return True
        logger.info("another tick took the lease: it counts after this invocation's news")
        return False

    def _let_go_after_failure(self, owner: str) -> None:
        """Free the lease for the next tick; if that fails too, it expires with this invocation."""
        try:
            self._lease.let_go(owner)
        except Exception as error:
            logger.warning("could not let go of the tick lease", extra={"reason": str(error)})

    def _ticks(self, ended: EndedExecution | None) -> TickReport:
        began = self._clock()
        report = self.tick(ended)
        while (
            report.stopped in WAITING
            and self._clock() - began + self._interval < self._policy.loop_seconds
            and self._time_for_another_tick()
        ):
            self._sleep(self._interval)
            report.add(self.tick())
        return report

    def tick(self, ended: EndedExecution | None = None) -> TickReport:
        """Count RUNNING, then admit up to the free slots from the queue."""
        report = TickReport()
        try:
            self._ensure_standard()
            report.running = self.count_running(ended, report)
        except TransientError as error:
            # Without a count nothing may start; the next tick tries again.
            report.stopped = "throttled"
            logger.warning("could not count RUNNING executions", extra={"reason": str(error)})
            return report
        free = report.free = free_slots(self._max, report.running)
        logger.info("capacity", extra={"running": report.running, "free": free, "max": self._max})
        report.stopped = "capacity"
        with ThreadPoolExecutor(self._policy.start_concurrency, thread_name_prefix="dispatcher") as pool:
            while free > 0:
                if self._remaining_seconds() < self._policy.time_margin_seconds:
                    report.stopped = "time"
                    break
                try:
                    messages, receive_stop = self._receive_round(free, pool)
                except TransientError as error:
                    report.stopped = "throttled"
                    logger.warning("could not receive", extra={"reason": str(error)})
                    break
                if not messages:
                    report.stopped = "drained"
                    break
                outcome = self._admit(messages, free, pool)
                free -= len(outcome.started)
                self._settle(outcome, report, pool)
                self._forget_never_started(outcome)
                stop_reason = outcome.stop_reason or receive_stop
                if stop_reason is not None:
                    report.stopped = "throttled"
                    logger.warning("stopped admitting", extra={"reason": stop_reason})
                    break
                if not (outcome.started or outcome.already_started or outcome.dead_letters):
                    # Everything received waits (e.g. a redrive job whose execution no read
                    # shows yet, and its group): receiving again would hand back the same.
                    report.stopped = "waiting"
                    break
        return report

    # -- counting ---------------------------------------------------------------------

    def _note_end(self, ended: EndedExecution) -> None:
        """Keep the event's news for the ticks of the next minute and a half."""
        logger.info("execution ended", extra={"execution": ended.name, "stopped_at": ended.stopped_at})
        try:
            self._state.note_ended(ended, self._clock())
        except TransientError as error:
            # This tick still uses the event; later ticks count the execution until the
            # list stops showing it, which is safe.
            logger.warning("could not record the end", extra={"reason": str(error)})

    def _ensure_standard(self) -> None:
        arn = self._state_machine.arn
        if arn not in self._warm.standard:
            self._state_machine.ensure_standard()
            self._warm.standard.add(arn)

    def count_running(self, ended: EndedExecution | None = None, report: TickReport | None = None) -> int:
        """RUNNING: the list, less executions known to have ended, plus recorded starts it doesn't show."""
        now = self._clock()
        window = self._state.window(now - RECENT_START_WINDOW_SECONDS)
        ends = latest_ends([*window.ended, *([ended] if ended is not None else [])])
        arn = self._state_machine.arn
        listing = self._warm.listing(arn, now, self._policy.list_reuse_seconds)
        if listing is None:
            listing = self._state_machine.list_running(self._max, ends, listed_at=now)
            self._warm.keep(arn, listing)
        count = plan_count(listing, ends, window.starts, self._max, now)
        if report is not None and listing.complete and listing.oldest_started_at is not None:
            report.oldest_running_seconds = round(max(0.0, now - listing.oldest_started_at), 3)
        running = count.running
        resolved = list(count.resolved)
        for index, record in enumerate(count.to_check):
            if running >= self._max:
                break
            try:
                state = self._state_machine.state_of(record.name)
            except TransientError as error:
                # Unknown means running: the cap never depends on a read that failed.
                running += len(count.to_check) - index
                logger.warning("could not check recorded starts", extra={"reason": str(error)})
                break
            if state is None:
                counts = still_counts(None, record, now)
            else:
                counts = still_counts(state.status, record, now, state.redrive_count)
            if counts:
                running += 1
            else:
                resolved.append(record)
        if resolved:
            self._state.forget(resolved)
        return running

    # -- admitting --------------------------------------------------------------------

    def _receive_round(self, free: int, pool: Executor) -> tuple[list[QueuedMessage], str | None]:
        """Receive up to one round of messages; the reason receiving stopped early, if any.

        The first receive long-polls. When it comes back full, the rest of the round is
        received at once, in parallel and without waiting: FIFO never hands the same
        group to two receives, so each group's messages still arrive in send order.
        """
        wanted = round_size(free)
        first = self._queue.receive(receive_size(wanted))
        if len(first) < receive_size(wanted) or len(first) == wanted:
            return first, None
        sizes = [receive_size(wanted - taken) for taken in range(len(first), wanted, SQS_MAX_RECEIVE)]
        batches = settled(pool, lambda size: self._queue.receive(size, wait=False), sizes)
        messages = first + [message for batch in batches if isinstance(batch, list) for message in batch]
        failure = first_failure([batch for batch in batches if not isinstance(batch, TransientError)])
        if failure is not None:
            self._queue.release(messages)
            raise failure
        throttled = next((batch for batch in batches if isinstance(batch, TransientError)), None)
        return messages, None if throttled is None else str(throttled)

    def _admit(self, messages: list[QueuedMessage], free: int, pool: Executor) -> RoundOutcome:
        """Decide, record and start one round, concurrently across message groups."""
        outcome = RoundOutcome()
        try:
            admission = admit(messages, free)
            outcome.dead_letters += admission.dead_letters
            outcome.held_back += admission.held_back
            recorded = self._record(admission.starts, outcome, pool)
            stop = threading.Event()
            groups = settled(
                pool, lambda group: self._start_group(group, recorded, stop), by_group(admission.starts)
            )
            failure = first_failure(groups)
            if failure is not None:
                raise failure
            for group in groups:
                outcome.merge(group)  # type: ignore[arg-type]  # no failure: every one is a GroupOutcome
            failed = self._dead_letter_queue.send(outcome.dead_letters)
        except BaseException:
            # A configuration error or a bug: every message of the round stays queued.
            self._queue.release(messages)
            raise
        for letter in failed:
            outcome.dead_letters.remove(letter)
            outcome.held_back.append(letter.message)
        if failed:
            # Released poison would be received again at once: stop until the next tick.
            outcome.stop_reason = f"the dead-letter queue refused {len(failed)} message(s)"
        return outcome

    def _record(self, starts: Sequence[Start], outcome: RoundOutcome, pool: Executor) -> set[str]:
        """Write the round's starts to the state table; return the names that may start.

        A batch still failing after retries (maybe written, maybe not) or left
        unprocessed stops admitting after this round, and its messages don't start.
        """
        groups: dict[str, str] = {}
        redrives: dict[str, int] = {}
        for start in starts:
            groups.setdefault(start.name, start.message.group_id)
            if start.redrive_count is not None:
                redrives.setdefault(start.name, start.redrive_count)
        outcome.recorded = self._state.starts_at(groups, self._clock(), redrives)
        batches = chunks(outcome.recorded, BATCH_WRITE_LIMIT)
        results = settled(pool, self._state.record, batches)
        failure = first_failure([result for result in results if not isinstance(result, TransientError)])
        if failure is not None:
            raise failure
        recorded: set[str] = set()
        for batch, result in zip(batches, results, strict=True):
            if isinstance(result, TransientError):
                outcome.stop_reason = outcome.stop_reason or str(result)
                continue
            unprocessed = {record.name for record in result}  # type: ignore[union-attr]
            if unprocessed:
                outcome.stop_reason = outcome.stop_reason or (
                    f"the state table left {len(unprocessed)} start record(s) unprocessed"
                )
            recorded.update(record.name for record in batch if record.name not in unprocessed)
        return recorded

    def _start_group(self, starts: list[Start], recorded: set[str], stop: threading.Event) -> GroupOutcome:
        """Start one group's messages in order; after a throttle anywhere, start no more."""
        outcome = GroupOutcome()
        for index, start in enumerate(starts):
            if stop.is_set() or start.name not in recorded:
                outcome.held_back += [later.message for later in starts[index:]]
                break
            outcome.attempted.add(start.name)
            try:
                self._start(start, outcome)
            except NotYetError as error:
                # Nothing was started: the record can go, and the group waits for a later tick.
                outcome.attempted.discard(start.name)
                outcome.held_back += [later.message for later in starts[index:]]
                logger.info("waiting", extra={"execution": start.name, "reason": str(error)})
                break
            except TransientError as error:
                stop.set()
                outcome.stop_reason = str(error)
                outcome.held_back += [later.message for later in starts[index:]]
                break
            except BaseException:
                stop.set()
                raise
        return outcome

    def _start(self, start: Start, outcome: GroupOutcome) -> None:
        if start.redrive:
            self._redrive(start, outcome)
            return
        message, name = start.message, start.name
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

    def _redrive(self, start: Start, outcome: GroupOutcome) -> None:
        """Continue a closed execution from its failed state, unless that was done already.

        The execution's status and ``redriveCount`` tell whether this job's redrive
        happened (a redelivery after a crash): it never happens twice. A read that lags
        behind the redrive is covered by the client token, the same for every attempt.
        """
        message, name = start.message, start.name
        state = self._state_machine.state_of(name)
        decision = redrive_decision(
            None if state is None else state.status,
            0 if state is None else state.redrive_count,
            start,
            self._clock(),
        )
        if decision == "done":
            outcome.already_started.append(message)
            logger.info("already redriven", extra={"execution": name, "message_id": message.message_id})
            return
        if decision == "wait":
            raise NotYetError(
                f"DescribeExecution({name}) shows a state older than the redrive job's"
                + (" (no execution yet)" if state is None else "")
            )
        if decision != "redrive":
            outcome.dead_letters.append(DeadLetter(message, decision))
            return
        try:
            self._state_machine.redrive(
                name, redrive_token(self._state_machine.execution_arn(name), start.redrive_count or 0)
            )
        except RejectedInputError as error:
            outcome.dead_letters.append(DeadLetter(message, str(error)))
            return
        outcome.started.append(message)
        outcome.redriven.append(message)
        logger.info(
            "redriven",
            extra={"execution": name, "message_id": message.message_id, "group": message.group_id},
        )

    # -- settling ---------------------------------------------------------------------

    def _settle(self, outcome: RoundOutcome, report: TickReport, pool: Executor) -> None:
        """Delete what is done, release what waits, and count both."""
        for letter in outcome.dead_letters:
            logger.warning(
                "dead-lettered",
                extra={"message_id": letter.message.message_id, "reason": letter.reason},
            )
        done = outcome.started + outcome.already_started + [letter.message for letter in outcome.dead_letters]
        deletes = settled(pool, self._queue.delete, chunks(done, SQS_MAX_BATCH))
        failure = first_failure(deletes)
        if isinstance(failure, ConfigurationError):
            # Nothing can be deleted: let every message of the round come back now. The
            # started ones are found already started, the poison is dead-lettered again
            # under the same deduplication id.
            self._queue.release(outcome.held_back + done)
            raise failure
        if failure is not None:
            raise failure
        failed_deletes = [message for failed in deletes for message in failed]  # type: ignore[union-attr]
        if failed_deletes:
            logger.warning(
                "delete failed; the messages will be redelivered and found already started",
                extra={"message_ids": [message.message_id for message in failed_deletes]},
            )
        self._queue.release(outcome.held_back)
        report.started += len(outcome.started)
        report.redriven += len(outcome.redriven)
        report.already_started += len(outcome.already_started)
        report.dead_lettered += len(outcome.dead_letters)
        report.released += len(outcome.held_back)
        report.delete_failures += len(failed_deletes)

    def _forget_never_started(self, outcome: RoundOutcome) -> None:
        """Free at once the slots recorded for starts this round never attempted.

        Best effort: a record left behind holds its slot for at most the review window.
        """
        never_started = outcome.never_started()
        if never_started:
            self._state.forget(never_started)
