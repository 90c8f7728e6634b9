"""One admission round: receive up to 100 messages, decide, record and start them, then settle.

Receives are batches of 10, in parallel once the first comes back full; starts are
recorded in `BatchWriteItem` calls of 25 and made on the start threads, one group per
thread (a first wave of at most 10 groups, the rest once it came back unthrottled),
paced below `StartExecution`'s quota; what is done is deleted in batches of 10, poison
dead-lettered, the rest released.
"""

from __future__ import annotations

from dispatcher.core.admission import Admission, admit
from dispatcher.core.batching import SQS_BATCH_LIMIT, chunks, receive_size, round_size
from dispatcher.core.errors import ConfigurationError, TransientError
from dispatcher.core.messages import QueuedMessage
from dispatcher.telemetry import logger
from dispatcher.tick.pool import first_failure
from dispatcher.tick.ports import LanePorts, Runtime, StartThreads
from dispatcher.tick.report import Counts, TickReport
from dispatcher.tick.starts import RoundOutcome, Starter
from dispatcher.tick.warm import WarmState


class Round:
    """The rounds of one tick on one lane, on the tick's start threads."""

    def __init__(self, ports: LanePorts, pool: StartThreads, runtime: Runtime, warm: WarmState) -> None:
        self._ports = ports
        self._pool = pool
        self._runtime = runtime
        self._fan_out = warm.fan_out(ports.name)
        self._pace = warm.paces_for(ports.state_machine.arn).start
        self._starter = Starter(
            ports.state_machine, ports.state_table, pool, runtime.clock, warm.start_latency
        )

    def receive(self, free: int) -> tuple[list[QueuedMessage], str | None]:
        """Receive up to one round of messages; the reason receiving stopped early, if any.

        The first receive long-polls. When it comes back full, more of the round is
        received at once, in parallel and without waiting: FIFO never hands the same
        group to two receives, so each group's messages still arrive in send order. How
        many follows what such receives returned before (`FanOut`): with one group in
        flight at a time they come back empty.
        """
        queue = self._ports.queue
        wanted = round_size(free)
        first = queue.receive(receive_size(wanted))
        if len(first) < receive_size(wanted) or len(first) == wanted:
            return first, None
        sizes = [receive_size(wanted - taken) for taken in range(len(first), wanted, SQS_BATCH_LIMIT)]
        sizes = sizes[: self._fan_out.receives(len(sizes))]
        if not sizes:
            return first, None
        batches = self._pool.settle(lambda size: queue.receive(size, wait=False), sizes)
        self._fan_out.learn(len(sizes), sum(1 for batch in batches if isinstance(batch, list) and batch))
        messages = first + [message for batch in batches if isinstance(batch, list) for message in batch]
        failure = first_failure([batch for batch in batches if not isinstance(batch, TransientError)])
        if failure is not None:
            queue.release(messages)
            raise failure
        throttled = next((batch for batch in batches if isinstance(batch, TransientError)), None)
        return messages, None if throttled is None else str(throttled)

    def admit(self, messages: list[QueuedMessage], free: int) -> RoundOutcome:
        """Decide, record and start one round, concurrently across message groups."""
        outcome = RoundOutcome()
        try:
            admission = self._within_rate(messages, admit(messages, free), outcome)
            outcome.dead_letters += admission.dead_letters
            outcome.held_back += admission.held_back
            recorded = self._starter.record(admission.starts, outcome)
            wait = self._pace.reserve(self._runtime.clock(), len(recorded))
            if wait:
                logger.info("starts paced", extra={"seconds": round(wait, 3), "starts": len(recorded)})
                self._runtime.sleep(wait)
            for group in self._starter.start(admission.starts, recorded):
                outcome.merge(group)
            failed = self._ports.dead_letters.send(outcome.dead_letters)
        except BaseException:
            # A configuration error or a bug: every message of the round stays queued.
            self._ports.queue.release(messages)
            raise
        for letter in failed:
            outcome.dead_letters.remove(letter)
            outcome.held_back.append(letter.message)
        if failed:
            # Released poison would be received again at once: stop until the next tick.
            outcome.stop_reason = f"the dead-letter queue refused {len(failed)} message(s)"
        return outcome

    def _within_rate(
        self, messages: list[QueuedMessage], admission: Admission, outcome: RoundOutcome
    ) -> Admission:
        """The admission cut to the lane's start-rate tokens (one conditional write for the round).

        What waits for the rate is released in order, never dead-lettered; a bucket that
        can't be read or written grants nothing and stops admitting until the next tick.
        """
        bucket = self._ports.rate
        if bucket is None or not admission.starts:
            return admission
        wanted = len(admission.starts)
        try:
            granted = bucket.take(wanted, self._runtime.clock())
        except TransientError as error:
            outcome.stop_reason = f"could not take start-rate tokens: {error}"
            granted = 0
        if granted < wanted:
            logger.info("starts wait for the lane's rate", extra={"wanted": wanted, "granted": granted})
            outcome.rate_spent = outcome.stop_reason is None
            return admit(messages, granted)
        return admission

    def settle(self, outcome: RoundOutcome, report: TickReport) -> None:
        """Delete what is done, release what waits, and count both (as the lane's, in ``report``)."""
        queue = self._ports.queue
        for letter in outcome.dead_letters:
            logger.warning(
                "dead-lettered",
                extra={"message_id": letter.message.message_id, "reason": letter.reason},
            )
        done = outcome.started + outcome.already_started + [letter.message for letter in outcome.dead_letters]
        deletes = self._pool.settle(queue.delete, chunks(done, SQS_BATCH_LIMIT))
        failure = first_failure(deletes)
        if isinstance(failure, ConfigurationError):
            # Nothing can be deleted: let every message of the round come back now. The
            # started ones are found already started, the poison is dead-lettered again
            # under the same deduplication id.
            queue.release(outcome.held_back + done)
            raise failure
        if failure is not None:
            raise failure
        failed_deletes = [message for failed in deletes for message in failed]  # type: ignore[union-attr]
        if failed_deletes:
            logger.warning(
                "delete failed; the messages will be redelivered and found already started",
                extra={"message_ids": [message.message_id for message in failed_deletes]},
            )
        queue.release(outcome.held_back)
        counts = Counts(
            started=len(outcome.started),
            redriven=len(outcome.redriven),
            already_started=len(outcome.already_started),
            dead_lettered=len(outcome.dead_letters),
            released=len(outcome.held_back),
            delete_failures=len(failed_deletes),
        )
        report.settle(self._ports.name, counts)

    def forget_never_started(self, outcome: RoundOutcome) -> None:
        """Free at once the slots recorded for starts this round never attempted.

        Best effort: a record left behind holds its slot for at most the review window.
        """
        never_started = outcome.never_started()
        if never_started:
            self._ports.state_table.forget(never_started, self._runtime.clock())
