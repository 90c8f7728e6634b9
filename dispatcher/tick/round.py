"""One admission round over the lanes of a pass: receive, decide, record and start, then settle.

Each lane receives up to its part of the round (batches of 10, in parallel once the first
comes back full), the lanes at once, and decides what its free slots admit. What they
admitted is one round of at most 100 starts: paced below `StartExecution`'s quota, cut to
each rate-capped lane's tokens (taken now, so the calls follow them at once), recorded
together in `BatchWriteItem` calls of 25, then started on the start threads, one group
per thread (a first wave of at most 10 groups of all the lanes, rate-capped lanes first,
the rest once it came back unthrottled). Then each lane deletes what is done in batches
of 10, dead-letters its poison and makes the rest visible again, the lanes at once. With one lane,
this is that lane's round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from dispatcher.core.admission import Admission
from dispatcher.core.batching import SQS_BATCH_LIMIT, chunks, receive_size, round_size
from dispatcher.core.errors import ConfigurationError, TransientError
from dispatcher.core.jobs import Cancellations, JobRecord
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.outcomes import Counts, Outcome
from dispatcher.core.pacing import Pace
from dispatcher.core.tenants import FAIR_SHARE_LOOK_AHEAD, SharedAdmission
from dispatcher.telemetry import logger
from dispatcher.tick.groups import GroupBook
from dispatcher.tick.outcomes import RoundOutcome
from dispatcher.tick.ports import JobRecords, MemberPorts, Roster, Runtime, StartLedger, StartThreads
from dispatcher.tick.report import StopReason
from dispatcher.tick.starts import MemberStarts, Starter, by_roster
from dispatcher.tick.threads import first_failure
from dispatcher.tick.warm import WarmState

Item = TypeVar("Item")
Result = TypeVar("Result")

LaneResult = tuple[Counts, "StopReason | None"]
"""What one lane's part of a round did, and why its admission stops (None: it goes on)."""


class MemberRound:
    """One pool member's side of its rounds in one tick (a lane's, or a gate's): its queue and dead letters.

    A member receives its part of a round, decides what its free slots admit, and, once
    the round's calls are made, deletes what is done, dead-letters its poison and makes visible
    the rest. What it admits, how it is paced and what its call is are the member's own.
    """

    def __init__(
        self,
        ports: MemberPorts,
        pool: StartThreads,
        *,
        warm: WarmState,
        books: Mapping[str, GroupBook] | None = None,
    ) -> None:
        """``books``: each tenant member's message groups this tick (`GroupBook`)."""
        self._ports = ports
        self._pool = pool
        self._warm = warm
        self._fan_out = warm.fan_out(ports.name)
        self.book = None if books is None else books.get(ports.name)
        """Its message groups this tick, when it counts by group (None: groups don't matter)."""

    @property
    def name(self) -> str:
        """The member's name."""
        return self._ports.name

    @property
    def rated(self) -> bool:
        """Whether its calls are capped by a start rate (a lane's `starts_per_second`)."""
        return False

    def pace(self) -> Pace:
        """The tick's own bucket below the quota of its calls (the account's, in its region)."""
        raise NotImplementedError

    @property
    def was_empty(self) -> bool:
        """Whether its queue's last first receive came back empty."""
        return self._fan_out.empty

    def waits(self, others_busy: bool, now: float) -> bool:
        """Whether its first receive of this round long-polls (`FanOut.waits`)."""
        return self._fan_out.waits(others_busy, now)

    def receive(
        self, free: int, *, wait: bool = True, now: float = 0.0
    ) -> tuple[list[QueuedMessage], str | None]:
        """Receive up to one round of messages; the reason receiving stopped early, if any.

        The first receive long-polls (at ``now``), unless ``wait`` is False. When it comes
        back full, more of the round is received at once, in parallel and without waiting:
        FIFO never hands the same group to two receives, so each group's messages still
        arrive in send order. How many follows what such receives returned before
        (`FanOut`): with one group in flight at a time they come back empty. A fair-share
        member receives one batch beyond its free slots, always: FIFO hands out a deep
        group first, and the batch after it shows the others (`FAIR_SHARE_LOOK_AHEAD`).
        """
        queue = self._ports.queue
        look_ahead = FAIR_SHARE_LOOK_AHEAD if self.book is not None and self.book.share.fair_share else 0
        wanted = round_size(free + look_ahead)
        first = queue.receive(receive_size(wanted), wait=wait)
        self._fan_out.first_came(len(first), waited=wait, now=now)
        if len(first) < receive_size(wanted) or len(first) == wanted:
            return first, None
        return self._receive_more(first, wanted, look_ahead=bool(look_ahead))

    def _receive_more(
        self, first: list[QueuedMessage], wanted: int, *, look_ahead: bool
    ) -> tuple[list[QueuedMessage], str | None]:
        """The round: ``first`` and the rest; why receiving stopped early (a throttle), if it did.

        The rest comes in parallel receives without waiting, as many as `FanOut` expects to fill.
        """
        queue = self._ports.queue
        sizes = [receive_size(wanted - taken) for taken in range(len(first), wanted, SQS_BATCH_LIMIT)]
        sizes = sizes[: max(1 if look_ahead else 0, self._fan_out.receives(len(sizes)))]
        if not sizes:
            return first, None
        batches = self._pool.gather(lambda size: queue.receive(size, wait=False), sizes)
        self._fan_out.learn(len(sizes), sum(1 for batch in batches if isinstance(batch, list) and batch))
        try:
            more, throttled = _received(batches)
        except BaseException:
            queue.make_visible(
                first + [message for batch in batches if isinstance(batch, list) for message in batch]
            )
            raise
        return first + more, throttled

    def decide(self, messages: Sequence[QueuedMessage], free: int, now: float) -> Admission:
        """What the member's free slots admit of what it received (the receive began at ``now``)."""
        raise NotImplementedError

    def screen(self, part: Prepared, cancellations: Cancellations) -> None:
        """Drop the part's jobs that ``cancellations`` name (only a lane's jobs can be cancelled)."""

    def job_records(self, part: Prepared, now: float) -> list[JobRecord]:
        """What to keep of the part's jobs that never started (a lane's: cancelled, expired, poison)."""
        return []

    def prepare(self, free: int, *, wait: bool = True, now: float = 0.0) -> Prepared | None:
        """Receive and decide this member's part of a round (None: its queue handed out nothing).

        ``wait``: whether the first receive long-polls (at ``now``).
        """
        messages, receive_stop = self.receive(free, wait=wait, now=now)
        if not messages:
            return None
        try:
            admission = self.decide(messages, free, now)
        except BaseException:
            self.make_visible(messages)
            raise
        return Prepared(self, messages, receive_stop, admission, received_at=now)

    def within_rate(self, part: Prepared, now: float) -> None:
        """Cut the part's admission to the member's rate (only a rate-capped lane has one)."""

    def starts_of(self, part: Prepared, clock: Callable[[], float]) -> MemberStarts:
        """The part's calls, its admission decided: its poison and what waits go to its outcome."""
        part.outcome.dead_letters += part.admission.dead_letters
        part.outcome.add(Outcome.WAITING, part.admission.waiting)
        if isinstance(part.admission, SharedAdmission):
            part.outcome.held_for_group += part.admission.held_for_group
        part.starts = self._starts(part, clock)
        return part.starts

    def _starts(self, part: Prepared, clock: Callable[[], float]) -> MemberStarts:
        raise NotImplementedError

    def dead_letter(self, outcome: RoundOutcome) -> None:
        """Send the round's poison to the member's DLQ; what it refused waits, and stops the member."""
        failed = self._ports.dead_letters.send(outcome.dead_letters)
        for letter in failed:
            outcome.dead_letters.remove(letter)
            outcome.add(Outcome.WAITING, [letter.message])
        if failed:
            # Released poison would be received again at once: stop until the next tick.
            outcome.stop_reason = f"the dead-letter queue refused {len(failed)} message(s)"

    def settle(self, part: Prepared) -> Counts:
        """Delete what is done, make what waits visible again; the member's counts of the round."""
        outcome = part.outcome
        queue = self._ports.queue
        for letter in outcome.dead_letters:
            logger.warning(
                "dead-lettered",
                extra={"message_id": letter.message.message_id, "reason": letter.reason},
            )
        unsettled = {message.message_id for message in outcome.unsettled}
        done = [message for message in outcome.done() if message.message_id not in unsettled]
        failed_deletes = self._delete(done, outcome)
        outcome.undeleted = failed_deletes
        queue.make_visible(self._still_waiting(outcome))
        if self.book is not None:
            self.book.started(outcome.of(Outcome.STARTED) + self._also_counted(outcome))
        return outcome.counts(delete_failures=len(failed_deletes))

    def _delete(self, done: list[QueuedMessage], outcome: RoundOutcome) -> list[QueuedMessage]:
        """Delete the round's finished messages; those whose delete failed (they come back, found started)."""
        queue = self._ports.queue
        deletes = self._pool.gather(queue.delete, chunks(done, SQS_BATCH_LIMIT))
        failure = first_failure(deletes)
        if isinstance(failure, ConfigurationError):
            # Nothing can be deleted: let every message of the round come back now. The
            # started ones are found already started, the poison is dead-lettered again
            # under the same deduplication id.
            queue.make_visible(outcome.waiting + done)
            raise failure
        if failure is not None:
            raise failure
        failed_deletes = [message for failed in deletes for message in failed]  # type: ignore[union-attr]
        if failed_deletes:
            logger.warning(
                "delete failed; the messages will be redelivered and found already started",
                extra={"message_ids": [message.message_id for message in failed_deletes]},
            )
        return failed_deletes

    def _still_waiting(self, outcome: RoundOutcome) -> list[QueuedMessage]:
        """What of the round comes back now: its waiting jobs, less those its group's book holds back."""
        waiting = outcome.waiting + outcome.unsettled
        if outcome.held_for_group and self.book is not None:
            held = {message.message_id for message in outcome.held_for_group}
            waiting = [message for message in waiting if message.message_id not in held]
            not_held = self.book.hold(self._ports.queue, outcome.held_for_group)
            outcome.held_for_group = [m for m in outcome.held_for_group if m not in not_held]
            waiting += not_held
        return waiting

    @staticmethod
    def _also_counted(outcome: RoundOutcome) -> list[QueuedMessage]:
        """Of the round's jobs not started now, those counted in their group from now on (already started)."""
        return outcome.of(Outcome.ALREADY)

    def make_visible(self, messages: Sequence[QueuedMessage]) -> None:
        """Make messages this member received visible again now (best effort: else they come back later)."""
        self._ports.queue.make_visible(messages)


def _received(
    batches: Sequence[list[QueuedMessage] | BaseException],
) -> tuple[list[QueuedMessage], str | None]:
    """Parallel receives' messages and why receiving stopped (a throttle); raise what isn't back-pressure."""
    messages = [message for batch in batches if isinstance(batch, list) for message in batch]
    failure = first_failure([batch for batch in batches if not isinstance(batch, TransientError)])
    if failure is not None:
        raise failure
    throttled = next((batch for batch in batches if isinstance(batch, TransientError)), None)
    return messages, None if throttled is None else str(throttled)


@dataclass
class Prepared:
    """One lane's part of a round: what it received, what it admitted, and how its starts went."""

    lane: MemberRound
    messages: list[QueuedMessage]
    receive_stop: str | None
    """Why receiving stopped early (a throttled receive), if it did."""
    admission: Admission
    """What the lane's free slots admit (cut to its start rate's tokens before the starts)."""
    outcome: RoundOutcome = field(default_factory=RoundOutcome)
    starts: MemberStarts | None = None
    """Its starts, once its admission is decided (`LaneRound.starts_of`)."""
    received_at: float = 0.0
    """When its receive began: a job whose deadline passed before then expires."""


class Round:
    """The rounds of one tick: each one over the lanes offered slots, on the tick's threads."""

    def __init__(  # noqa: PLR0913 — each is one part of the tick a round works with
        self,
        pool: StartThreads,
        lane_threads: StartThreads,
        runtime: Runtime,
        warm: WarmState,
        records: tuple[StartLedger, Mapping[str, Roster]],
        *,
        time_margin_seconds: float,
        jobs: JobRecords | None = None,
        cancellations: Callable[[], Mapping[str, Cancellations]] = dict,
    ) -> None:
        """``pool``: the start threads; ``lane_threads``: one per lane of a round, for its own calls.

        ``records``: where a round's starts are recorded: the ledger, and each member's roster.
        """
        self._lane_threads = lane_threads
        self._runtime = runtime
        self._warm = warm
        self._ledger, self._rosters = records
        self._jobs = jobs
        self._cancellations = cancellations
        """Each lane's pending cancellations, as this tick read them with its window."""
        self._margin = time_margin_seconds
        self._starter = Starter(pool, *records)

    def run(self, offers: Mapping[str, tuple[MemberRound, int]]) -> dict[str, LaneResult]:
        """One round over the lanes of ``offers`` (lane → its part of the round, and its free slots)."""
        if self._runtime.remaining_seconds() < self._margin:
            return {lane: (Counts(), StopReason.TIME) for lane in offers}
        lanes = list(offers)
        now = self._runtime.clock()
        busy = {lane for lane in lanes if not offers[lane][0].was_empty}
        waits = {lane: offers[lane][0].waits(bool(busy - {lane}), now) for lane in lanes}
        received = self._each(
            lambda lane: offers[lane][0].prepare(offers[lane][1], wait=waits[lane], now=now), lanes
        )
        results: dict[str, LaneResult] = {}
        prepared: list[Prepared] = []
        for lane, result in zip(lanes, received, strict=True):
            if isinstance(result, TransientError):
                logger.warning("could not receive", extra={"lane": lane, "reason": str(result)})
                results[lane] = (Counts(), StopReason.THROTTLED)
            elif result is None:
                results[lane] = (Counts(), StopReason.DRAINED)
            elif isinstance(result, Prepared):
                prepared.append(result)
        failure = first_failure(received)
        if not isinstance(failure, TransientError | None):
            for part in prepared:
                part.lane.make_visible(part.messages)
            raise failure
        if prepared:
            results.update(self._admit(prepared))
        return results

    def _admit(self, prepared: Sequence[Prepared]) -> dict[str, LaneResult]:
        """Pace, take the rates' tokens, record and start what the lanes admitted, dead-letter, settle.

        The lanes capped by a rate come first in the waves, so their calls follow their
        tokens at once.
        """
        prepared = sorted(prepared, key=lambda part: not part.lane.rated)
        try:
            self._pace(prepared)
            rated = [part for part in prepared if part.lane.rated and part.admission.starts]
            if rated:
                now = self._runtime.clock()
                self._raise_first(self._each(lambda part: part.lane.within_rate(part, now), rated))
            lanes = [part.lane.starts_of(part, self._runtime.clock) for part in prepared]
            self._starter.record(lanes, self._runtime.clock())
            self._screen(prepared)
            self._starter.start(lanes)
            self._raise_first(self._each(lambda part: part.lane.dead_letter(part.outcome), prepared))
        except BaseException:
            # A configuration error or a bug: every message of the round stays queued.
            for part in prepared:
                part.lane.make_visible(part.messages)
            raise
        counts = self._each(lambda part: part.lane.settle(part), prepared)
        self._raise_first(counts)
        self._forget_never_started(prepared)
        self._keep_records(prepared)
        return {
            part.lane.name: (lane_counts, _stop_after(part.outcome, part.receive_stop))  # type: ignore[misc]
            for part, lane_counts in zip(prepared, counts, strict=True)
        }

    def _screen(self, prepared: Sequence[Prepared]) -> None:
        """Drop the round's cancelled jobs, as this tick's read of the window found the cancellations.

        A cancellation written after that read is not seen here: `dispatcher cancel` waits
        for the tick in flight to end before it answers (`dispatcher.core.jobs`).
        """
        pending = self._cancellations()
        for part in prepared:
            part.lane.screen(part, pending.get(part.lane.name, Cancellations()))

    def _keep_records(self, prepared: Sequence[Prepared]) -> None:
        """Keep what `dispatcher job` reports of the round's jobs that never started; best effort."""
        if self._jobs is None:
            return
        now = self._runtime.clock()
        records = [record for part in prepared for record in part.lane.job_records(part, now)]
        if records and self._jobs.settle(records):
            logger.warning("some job records were not written", extra={"records": len(records)})

    def _forget_never_started(self, prepared: Sequence[Prepared]) -> None:
        """Free at once the slots recorded for starts this round never attempted, every lane's together.

        Best effort: a record left behind holds its slot for at most the review window.
        """
        starts = [start for part in prepared for start in part.outcome.never_started()[0]]
        entries = [entry for part in prepared for entry in part.outcome.never_started()[1]]
        if starts:
            self._ledger.void(starts, self._runtime.clock())
        for roster, leaving in by_roster(entries, self._rosters):
            roster.leave(leaving)

    def _pace(self, prepared: Sequence[Prepared]) -> None:
        """Wait, if need be, to stay below `StartExecution`'s quota (the account's, in each lane's region)."""
        wait = 0.0
        for part in prepared:
            wait = max(wait, part.lane.pace().reserve(self._runtime.clock(), len(part.admission.starts)))
        if wait:
            starts = sum(len(part.admission.starts) for part in prepared)
            logger.info("starts paced", extra={"seconds": round(wait, 3), "starts": starts})
            self._runtime.sleep(wait)

    def _each(self, call: Callable[[Item], Result], items: Sequence[Item]) -> list[Result | BaseException]:
        """``call`` on each item, on the lane threads when there are several; each result or failure."""
        if len(items) != 1:
            return self._lane_threads.gather(call, items)
        try:
            return [call(items[0])]
        except BaseException as error:  # handed back, as a thread pool hands back every failure
            return [error]

    @staticmethod
    def _raise_first(results: Sequence[object]) -> None:
        failure = first_failure(results)
        if failure is not None:
            raise failure


def _stop_after(outcome: RoundOutcome, receive_stop: str | None) -> StopReason | None:
    """Why a lane's admission stops after a round that admitted ``outcome``, or None to go on."""
    stop_reason = outcome.stop_reason or receive_stop
    if stop_reason is not None:
        logger.warning("stopped admitting", extra={"reason": stop_reason})
        return StopReason.THROTTLED
    if outcome.rate_spent:
        # The lane's rate is spent for now: its jobs wait for tokens as others wait for slots.
        return StopReason.CAPACITY
    if not (outcome.done() or outcome.held_for_group):
        # Everything received waits (e.g. a redrive job whose execution no read
        # shows yet, and its group): receiving again would hand back the same.
        return StopReason.WAITING
    return None
