"""A lane's side of its rounds: its queue, its start rate, its dead letters, and `StartExecution`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from dispatcher.core.admission import (
    Admission,
    Cancelled,
    DeadLetter,
    Expiring,
    Redrive,
    Start,
    admit,
    plan_message,
)
from dispatcher.core.errors import TransientError
from dispatcher.core.jobs import (
    Cancellations,
    Dropped,
    GroupCancellation,
    JobRecord,
    JobState,
    expiry,
    job_name,
    record_of_dead_letter,
    screen,
)
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.outcomes import Counts, Outcome
from dispatcher.core.pacing import Pace
from dispatcher.core.sizes import Reservation, too_large
from dispatcher.core.tenants import admit_shared
from dispatcher.core.topology import Lane
from dispatcher.telemetry import logger
from dispatcher.tick.groups import GroupBook
from dispatcher.tick.lane_starts import LaneStarts
from dispatcher.tick.member_round import MemberRound, Prepared
from dispatcher.tick.ports import LanePorts, StartThreads
from dispatcher.tick.warm import WarmState


class LaneRound(MemberRound):
    """One lane's side of its rounds in one tick: its queue, its start rate, its dead letters."""

    def __init__(  # noqa: PLR0913 — each is one part of the tick a lane's rounds work with
        self,
        ports: LanePorts,
        pool: StartThreads,
        *,
        warm: WarmState,
        books: Mapping[str, GroupBook] | None = None,
        settings: Callable[[], Lane] | None = None,
        in_window: Callable[[str, str], bool] = lambda _arn, _name: False,
        limits: Callable[[], Sequence[tuple[int | None, str]]] = list,
        reservation: Reservation | None = None,
    ) -> None:
        """``settings``: the lane as steered now (its deadline bound); None: no bound.

        ``in_window``: whether the tick's review window holds a start record of (state
        machine, name).
        """
        super().__init__(ports, pool, warm=warm, books=books)
        self._in_window = in_window
        self._limits = limits
        """The limits its jobs must fit in (its pool's MAX, its own, its groups'), each with whose it is."""
        self.reservation = reservation
        """Its pool's reservation, if it is for one of this lane's jobs (None once that job is admitted)."""
        self._lane = ports
        self._settings = settings
        self._why: dict[str, GroupCancellation | bool] = {}
        """Message id → what cancelled it (a group's cancellation, or True: by name), this round."""
        self._in_advance: set[str] = set()
        """Message ids of jobs sent after their name's cancellation (cancelled in advance), this round."""

    @property
    def max_wait_seconds(self) -> int | None:
        """The lane's bound on a job's wait, as steered now (None: none)."""
        return None if self._settings is None else self._settings().max_wait_seconds

    @property
    def state_machine_arn(self) -> str:
        """The state machine the lane starts."""
        return self._lane.state_machine.arn

    @property
    def sized_machine(self) -> str | None:
        """The state machine it starts: its jobs' sizes weigh its executions."""
        return self._lane.state_machine.arn

    @property
    def rated(self) -> bool:
        """Whether the lane's starts are capped by a start rate."""
        return self._lane.rate is not None

    def pace(self) -> Pace:
        """Below `StartExecution`'s quota, the account's in the lane's region."""
        return self._warm.paces_for(self.state_machine_arn).start

    def decide(
        self, messages: Sequence[QueuedMessage], free: int, now: float, *, max_starts: int | None = None
    ) -> Admission:
        """Start in receive order up to the free slots, poison to the DLQ, the rest waits (`admit`).

        A job received after its deadline (the receive began at ``now``) is dead-lettered as
        expired first, taking no slot. A lane that counts by message group holds a group's
        jobs at its limit, and with fair share gives the slots to the groups holding fewest
        first (`admit_shared`). ``max_starts``: the lane's start-rate tokens, when they bind.
        """
        max_wait = self.max_wait_seconds
        expired: list[DeadLetter] = []
        expiring: list[Start] = []
        rest: list[QueuedMessage] = []
        plan = functools.partial(_plan, self._limits())
        for message in messages:
            planned = plan(message)
            letter = None if isinstance(planned, DeadLetter) else expiry(message, now, max_wait)
            if letter is None or isinstance(planned, DeadLetter):
                rest.append(message)
            elif message.receive_count > 1 and not isinstance(planned, Redrive):
                # Received before, it may have been started: found so, or dead-lettered (`LaneStarts`).
                expiring.append(Expiring(message, planned.name, letter, slots=planned.slots))
            else:
                expired.append(letter)
        reserved = self.reservation
        hold = None if reserved is None else (reserved.name, reserved.slots)
        if self.book is None:
            admission = admit(rest, free, plan, max_starts=max_starts, hold=hold)
        else:
            admission = admit_shared(
                rest, free, self.book.share, self.book.running, plan=plan, max_starts=max_starts, hold=hold
            )
        self._note_sizes(admission)
        if expired or expiring:
            admission = replace(
                admission,
                # First in their groups, as FIFO handed them out: received again, they are
                # older than their groups' other jobs of this round.
                starts=(*expiring, *admission.starts),
                dead_letters=(*admission.dead_letters, *expired),
            )
        return admission

    def _note_sizes(self, admission: Admission) -> None:
        """Note the reserved job admitted, and the first large job found short (for a reservation).

        Its room stays held until it has started (`settle`): admitted, its start may still
        not happen this round (a throttle, its size not kept), and nothing else may take it.
        """
        reserved = self.reservation
        if reserved is not None and any(start.name == reserved.name for start in admission.starts):
            self.reserved_admitted = True
        if self.short is None:
            large = [start for start in admission.short if start.slots > 1]
            self.short = None if not large else (large[0].name, large[0].slots)

    def settle(self, part: Prepared) -> Counts:
        """`MemberRound.settle`; the reserved job's room is let go once it started."""
        counts = super().settle(part)
        reserved = self.reservation
        if reserved is not None and any(
            start.name == reserved.name and start.message in part.outcome.of(Outcome.STARTED)
            for start in part.admission.starts
        ):
            self.reservation = None
        return counts

    def screen(self, part: Prepared, cancellations: Cancellations) -> None:
        """Drop the part's jobs that ``cancellations`` name: its admitted ones never start, what waits leaves.

        A held job of a cancelled group is dropped too. What is dropped is deleted once
        the round is done (`Outcome.CANCELLED`).
        """
        if not cancellations:
            return
        outcome = part.outcome
        admitted = [(start.message, start.name) for start in part.admission.starts]
        screened = screen(cancellations, admitted, outcome.messages[Outcome.WAITING])
        if isinstance(part.starts, LaneStarts):
            part.starts.cancel(screened.started)
        self._why.update(screened.why)
        self._in_advance |= screened.in_advance
        if screened.dropped:
            ids = {message.message_id for message in screened.dropped}
            outcome.messages[Outcome.WAITING] = [
                message for message in outcome.messages[Outcome.WAITING] if message.message_id not in ids
            ]
            outcome.held_for_group = [
                message for message in outcome.held_for_group if message.message_id not in ids
            ]
            outcome.add(Outcome.CANCELLED, screened.dropped)

    def job_records(self, part: Prepared, now: float) -> list[JobRecord | Dropped]:
        """What `dispatcher job` reports of the part's jobs that never started (cancelled, expired, poison).

        A job cancelled by name already has its record (the cancellation wrote it, with
        its reason); one sent after its name's cancellation (cancelled in advance: a typo,
        or a name cancelled before its job was sent) also gets a note that it was dropped,
        and when it was sent. A group's job gets its record now.
        """
        outcome = part.outcome
        undeleted = {message.message_id for message in outcome.undeleted}
        records: list[JobRecord | Dropped] = []
        for message in _cancelled(part):
            if message.message_id not in undeleted:
                records += self._cancelled_record(message, now)
        for letter in outcome.dead_letters:
            if letter.message.message_id not in undeleted:
                record = record_of_dead_letter(self.name, letter, now, self.max_wait_seconds)
                records += [] if record is None else [record]
        return records

    def _cancelled_record(self, message: QueuedMessage, now: float) -> list[JobRecord | Dropped]:
        """A cancelled job's record to write now: a group's job's, or a note of one cancelled in advance."""
        why, name = self._why.get(message.message_id), job_name(message)
        if name is None:
            return []
        if isinstance(why, GroupCancellation):
            reason = why.reason or f"message group {why.group} cancelled"
            return [JobRecord(self.name, name, JobState.CANCELLED, reason, now)]
        if message.message_id in self._in_advance:
            return [Dropped(self.name, name, now, message.sent_at)]
        return []

    def within_rate(self, part: Prepared, now: float) -> None:
        """Cut the part's admission to the lane's start-rate tokens as of ``now`` (one conditional write).

        Taken once the round is about to start (its records and the starts follow at
        once), so the calls are as far apart as their tokens. What waits for the rate is
        shown again in order, never dead-lettered; a bucket that can't be read or written
        grants nothing and stops admitting until the next tick.
        """
        bucket = self._lane.rate
        wanted = len(part.admission.starts)
        if bucket is None or not wanted:
            return
        try:
            granted = bucket.take(wanted, now)
        except TransientError as error:
            part.outcome.stop_reason = f"could not take start-rate tokens: {error}"
            granted = 0
        if granted < wanted:
            logger.info("starts wait for the lane's rate", extra={"wanted": wanted, "granted": granted})
            part.outcome.rate_spent = part.outcome.stop_reason is None
            part.admission = self.decide(part.messages, part.room, part.received_at, max_starts=granted)

    def _starts(self, part: Prepared, clock: Callable[[], float]) -> LaneStarts:
        lane, latency = self._lane, self._warm.start_latency
        return LaneStarts(
            lane.admissions,
            part.admission.starts,
            part.outcome,
            clock,
            latency,
            lane.name,
            roster=self.book is not None,
            in_window=self._in_window,
        )


def _plan(limits: Sequence[tuple[int | None, str]], message: QueuedMessage) -> Start | DeadLetter:
    """`plan_message`, and a job larger than a limit that can't grow is dead-lettered (`too_large`)."""
    planned = plan_message(message)
    if isinstance(planned, DeadLetter) or planned.slots == 1:
        return planned
    reason = too_large(planned.slots, limits)
    return planned if reason is None else DeadLetter(message, reason)


def _cancelled(part: Prepared) -> list[QueuedMessage]:
    """The part's cancelled jobs: those dropped, and its admitted ones (said to be once the round starts)."""
    starts = part.starts.starts if isinstance(part.starts, LaneStarts) else []
    unmade = [start.message for start in starts if isinstance(start, Cancelled)]
    found = {message.message_id: message for message in [*part.outcome.of(Outcome.CANCELLED), *unmade]}
    return list(found.values())
