"""A pool member's side of its rounds (a lane's, or a gate's): receive, decide, then settle its queue.

`dispatcher.tick.round` runs the rounds over the members; `LaneRound` and `GateRound` are the
two kinds of member.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dispatcher.core.admission import Admission
from dispatcher.core.batching import SQS_BATCH_LIMIT, chunks, receive_size, round_size
from dispatcher.core.errors import ConfigurationError, TransientError
from dispatcher.core.jobs import Cancellations, Dropped, JobRecord
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.outcomes import Counts, Outcome
from dispatcher.core.pacing import Pace
from dispatcher.core.tenants import FAIR_SHARE_LOOK_AHEAD
from dispatcher.telemetry import logger
from dispatcher.tick.groups import GroupBook
from dispatcher.tick.outcomes import RoundOutcome
from dispatcher.tick.ports import MemberPorts, StartThreads
from dispatcher.tick.starts import MemberStarts
from dispatcher.tick.threads import first_failure
from dispatcher.tick.warm import WarmState


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
        self.short: tuple[str, int] | None = None
        """The first large job of this tick that found too few free slots: its name and size (a lane's)."""
        self.reserved_admitted = False
        """Whether its pool's reservation's job, one of its own, was admitted this tick."""

    @property
    def name(self) -> str:
        """The member's name."""
        return self._ports.name

    @property
    def rated(self) -> bool:
        """Whether its calls are capped by a start rate (a lane's `starts_per_second`)."""
        return False

    @property
    def sized_machine(self) -> str | None:
        """The state machine whose executions its jobs' sizes weigh (a lane's; None: each takes one slot)."""
        return None

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

    def job_records(self, part: Prepared, now: float) -> list[JobRecord | Dropped]:
        """What to keep of the part's jobs that never started (a lane's: cancelled, expired, poison)."""
        return []

    def prepare(
        self, free: int, *, wait: bool = True, now: float = 0.0, room: int | None = None
    ) -> Prepared | None:
        """Receive and decide this member's part of a round (None: its queue handed out nothing).

        ``free``: the part's slots, as many messages as it receives at most; ``room``: the
        slots the member may still take this pass (a sized job larger than the part fits in
        it; None: the part). ``wait``: whether the first receive long-polls (at ``now``).
        """
        messages, receive_stop = self.receive(free, wait=wait, now=now)
        if not messages:
            return None
        room = free if room is None else max(free, room)
        try:
            admission = self.decide(messages, room, now)
        except BaseException:
            self.make_visible(messages)
            raise
        return Prepared(self, messages, receive_stop, admission, received_at=now, room=room)

    def within_rate(self, part: Prepared, now: float) -> None:
        """Cut the part's admission to the member's rate (only a rate-capped lane has one)."""

    def starts_of(self, part: Prepared, clock: Callable[[], float]) -> MemberStarts:
        """The part's calls, its admission decided: its poison and what waits go to its outcome."""
        part.outcome.dead_letters += part.admission.dead_letters
        part.outcome.add(Outcome.WAITING, part.admission.waiting)
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
            # Poison shown again would be received again at once: stop until the next tick.
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
        if self.book is not None:
            self.book.started(outcome.of(Outcome.STARTED) + self._also_counted(outcome))
        queue.make_visible(self._still_waiting(outcome))
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
        """What of the round comes back now: its waiting jobs, less those its group's book holds back.

        Held only while its group is still at its limit once the round's starts are counted:
        the job ahead of it that was to take the group's place may have been cancelled,
        refused or dead-lettered instead, and then it comes back for the next round.
        """
        waiting = outcome.waiting + outcome.unsettled
        if self.book is not None:
            outcome.held_for_group = self.book.at_limit_of(outcome.held_for_group)
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
    """One member's part of a round: what it received, what it admitted, and how its starts went."""

    member: MemberRound
    messages: list[QueuedMessage]
    receive_stop: str | None
    """Why receiving stopped early (a throttled receive), if it did."""
    admission: Admission
    """What the member's free slots admit (cut to its start rate's tokens before the starts)."""
    outcome: RoundOutcome = field(default_factory=RoundOutcome)
    starts: MemberStarts | None = None
    """Its starts, once its admission is decided (`LaneRound.starts_of`)."""
    received_at: float = 0.0
    """When its receive began: a job whose deadline passed before then expires."""
    room: int = 0
    """The slots its admission could take (its jobs' sizes)."""
