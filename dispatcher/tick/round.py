"""One admission round over the members of a pass: receive, decide, record and start, then settle.

Each member receives up to its part of the round (batches of 10, in parallel once the first
comes back full), the members at once, and decides what its free slots admit. What they
admitted is one round of at most 100 starts: paced below `StartExecution`'s quota, cut to
each rate-capped member's tokens (taken now, so the calls follow them at once), recorded
together in `BatchWriteItem` calls of 25, then started on the start threads, one group
per thread (a first wave of at most 10 groups of all the members, rate-capped members first,
the rest once it came back unthrottled). Then each member deletes what is done in batches
of 10, dead-letters its poison and makes the rest visible again, the members at once. With one member,
this is that member's round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar

from dispatcher.core.errors import TransientError
from dispatcher.core.jobs import Cancellations, Dropped, JobRecord
from dispatcher.core.outcomes import Counts, Outcome
from dispatcher.telemetry import logger
from dispatcher.tick.member_round import MemberRound, Prepared
from dispatcher.tick.outcomes import RoundOutcome
from dispatcher.tick.ports import JobRecords, Roster, Runtime, StartLedger, StartThreads
from dispatcher.tick.report import StopReason
from dispatcher.tick.sizes import SizeKeeper
from dispatcher.tick.starts import MemberStarts, Starter, by_roster
from dispatcher.tick.threads import first_failure
from dispatcher.tick.warm import WarmState

__all__ = ["MemberResult", "MemberRound", "Prepared", "Round"]

Item = TypeVar("Item")
Result = TypeVar("Result")


class MemberResult(NamedTuple):
    """What one member's part of a round did, and why its admission stops (None: it goes on)."""

    counts: Counts
    stop: StopReason | None
    slots: int = 0
    """The slots its starts took (a job's size each; an execution already inside a gate none)."""


class Round:
    """The rounds of one tick: each one over the members offered slots, on the tick's threads."""

    def __init__(  # noqa: PLR0913 — each is one part of the tick a round works with
        self,
        pool: StartThreads,
        member_threads: StartThreads,
        runtime: Runtime,
        warm: WarmState,
        records: tuple[StartLedger, Mapping[str, Roster]],
        *,
        time_margin_seconds: float,
        jobs: JobRecords | None = None,
        cancellations: Mapping[str, Cancellations] | None = None,
        sizes: SizeKeeper | None = None,
    ) -> None:
        """``pool``: the start threads; ``member_threads``: one per member of a round, for its own calls.

        ``records``: where a round's starts are recorded: the ledger, and each member's roster.
        """
        self._lane_threads = member_threads
        self._runtime = runtime
        self._warm = warm
        self._ledger, self._rosters = records
        self._jobs = jobs
        self._cancellations: Mapping[str, Cancellations] = cancellations or {}
        """Each member's pending cancellations, as this tick read them with its window."""
        self._margin = time_margin_seconds
        self._starter = Starter(pool, *records)
        self._sizes = sizes

    def run(
        self, offers: Mapping[str, tuple[MemberRound, int]], rooms: Mapping[str, int] | None = None
    ) -> dict[str, MemberResult]:
        """One round over the members of ``offers`` (member → its part of the round, and its free slots).

        ``rooms``: the slots each may still take in its pass (a sized job may be larger than its part).
        """
        rooms = rooms or {}
        if self._runtime.remaining_seconds() < self._margin:
            return {member: MemberResult(Counts(), StopReason.TIME) for member in offers}
        members = list(offers)
        now = self._runtime.clock()
        busy = {member for member in members if not offers[member][0].was_empty}
        waits = {member: offers[member][0].waits(bool(busy - {member}), now) for member in members}
        received = self._each(
            lambda member: offers[member][0].prepare(
                offers[member][1], wait=waits[member], now=now, room=rooms.get(member)
            ),
            members,
        )
        results, prepared = _received(members, received)
        failure = first_failure(received)
        if not isinstance(failure, TransientError | None):
            for part in prepared:
                part.member.make_visible(part.messages)
            raise failure
        if prepared:
            results.update(self._admit(prepared))
        return results

    def _admit(self, prepared: Sequence[Prepared]) -> dict[str, MemberResult]:
        """Pace, take the rates' tokens, record and start what the members admitted, dead-letter, settle.

        The members capped by a rate come first in the waves, so their calls follow their
        tokens at once.
        """
        prepared = sorted(prepared, key=lambda part: not part.member.rated)
        try:
            self._pace(prepared)
            rated = [part for part in prepared if part.member.rated and part.admission.starts]
            if rated:
                now = self._runtime.clock()
                self._raise_first(self._each(lambda part: part.member.within_rate(part, now), rated))
            members = [part.member.starts_of(part, self._runtime.clock) for part in prepared]
            self._screen(prepared)
            early = self._early_records(prepared)
            refused = self._keep_sizes(prepared, members)
            kept = self._starter.record(members, self._runtime.clock(), early)
            _refuse(members, refused)
            self._starter.start(members)
            self._raise_first(self._each(lambda part: part.member.dead_letter(part.outcome), prepared))
        except BaseException:
            # A configuration error or a bug: every message of the round stays queued.
            for part in prepared:
                part.member.make_visible(part.messages)
            raise
        counts = self._each(lambda part: part.member.settle(part), prepared)
        self._raise_first(counts)
        self._forget_never_started(prepared)
        self._keep_records(prepared, kept)
        return {
            part.member.name: MemberResult(
                member_counts,  # type: ignore[arg-type]
                _stop_after(part.outcome, part.receive_stop),
                _slots_started(part),
            )
            for part, member_counts in zip(prepared, counts, strict=True)
        }

    def _keep_sizes(
        self, prepared: Sequence[Prepared], members: Sequence[MemberStarts]
    ) -> dict[int, set[str]]:
        """Keep the round's sized starts before they happen; the names that may not start, by member."""
        if self._sizes is None:
            return {}
        return self._sizes.keep(
            [
                (part.member.name, part.member.sized_machine, starts)
                for part, starts in zip(prepared, members, strict=True)
            ],
            self._runtime.clock(),
        )

    def _screen(self, prepared: Sequence[Prepared]) -> None:
        """Drop the round's cancelled jobs, as this tick's read of the window found the cancellations.

        A cancellation written after that read is not seen here: `dispatcher cancel` waits
        for the tick in flight to end before it answers (`dispatcher.core.jobs`).
        """
        pending = self._cancellations
        for part in prepared:
            part.member.screen(part, pending.get(part.member.name, Cancellations()))

    def _early_records(self, prepared: Sequence[Prepared]) -> list[JobRecord | Dropped]:
        """The records of the jobs the round already knows will never start (expired, cancelled, poison).

        They go in the `BatchWriteItem` of the round's start records (no call of their own).
        One whose message is then not deleted is received again and decided the same way.
        """
        if self._jobs is None:
            return []
        now = self._runtime.clock()
        return [record for part in prepared for record in part.member.job_records(part, now)]

    def _keep_records(self, prepared: Sequence[Prepared], written: Sequence[JobRecord | Dropped]) -> None:
        """Keep what `dispatcher job` reports of the round's jobs that never started, bar ``written``.

        What the start records' call did not take: the round's records when it started
        nothing, and what its starts found (a name collision, say).
        """
        if self._jobs is None:
            return
        now = self._runtime.clock()
        done = {_kept(record) for record in written}
        records = [
            record
            for part in prepared
            for record in part.member.job_records(part, now)
            if _kept(record) not in done
        ]
        if records and self._jobs.write(records):
            logger.warning("some job records were not written", extra={"records": len(records)})

    def _forget_never_started(self, prepared: Sequence[Prepared]) -> None:
        """Free at once the slots recorded for starts this round never attempted, every member's together.

        Best effort: a record left behind holds its slot for at most the review window.
        """
        starts = [start for part in prepared for start in part.outcome.never_started()[0]]
        entries = [entry for part in prepared for entry in part.outcome.never_started()[1]]
        if starts:
            self._ledger.void(starts, self._runtime.clock())
        for roster, leaving in by_roster(entries, self._rosters):
            roster.leave(leaving)

    def _pace(self, prepared: Sequence[Prepared]) -> None:
        """Wait, if need be, to stay below `StartExecution`'s quota (the account's, in each region)."""
        wait = 0.0
        for part in prepared:
            wait = max(wait, part.member.pace().reserve(self._runtime.clock(), len(part.admission.starts)))
        if wait:
            starts = sum(len(part.admission.starts) for part in prepared)
            logger.info("starts paced", extra={"seconds": round(wait, 3), "starts": starts})
            self._runtime.sleep(wait)

    def _each(self, call: Callable[[Item], Result], items: Sequence[Item]) -> list[Result | BaseException]:
        """``call`` on each item, on the member threads when there are several; each result or failure."""
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


def _slots_started(part: Prepared) -> int:
    """The slots the part's starts took: each started job's size (one per start without a size)."""
    started = {message.message_id for message in part.outcome.of(Outcome.STARTED)}
    starts = [] if part.starts is None else part.starts.starts
    slots: int = sum(start.slots for start in starts if start.message.message_id in started)
    return slots


def _refuse(members: Sequence[MemberStarts], refused: Mapping[int, set[str]]) -> None:
    """The starts whose sizes could not be kept don't happen: they wait, and their member stops admitting."""
    for starts in members:
        names = refused.get(id(starts))
        if names:
            starts.recorded.difference_update(names)
            starts.outcome.stop_reason = (
                starts.outcome.stop_reason or "the state table did not keep the jobs' sizes"
            )


def _stop_after(outcome: RoundOutcome, receive_stop: str | None) -> StopReason | None:
    """Why a member's admission stops after a round that admitted ``outcome``, or None to go on."""
    stop_reason = outcome.stop_reason or receive_stop
    if stop_reason is not None:
        logger.warning("stopped admitting", extra={"reason": stop_reason})
        return StopReason.THROTTLED
    if outcome.rate_spent:
        # The member's rate is spent for now: its jobs wait for tokens as others wait for slots.
        return StopReason.CAPACITY
    if not (outcome.done() or outcome.held_for_group):
        # Everything received waits (e.g. a redrive job whose execution no read
        # shows yet, and its group): receiving again would hand back the same.
        return StopReason.WAITING
    return None


def _received(
    members: Sequence[str], received: Sequence[Prepared | BaseException | None]
) -> tuple[dict[str, MemberResult], list[Prepared]]:
    """Each member's receive: its part of the round, or why it stopped (nothing more; a throttle)."""
    results: dict[str, MemberResult] = {}
    prepared: list[Prepared] = []
    for member, result in zip(members, received, strict=True):
        if isinstance(result, TransientError):
            logger.warning("could not receive", extra={"lane": member, "reason": str(result)})
            results[member] = MemberResult(Counts(), StopReason.THROTTLED)
        elif result is None:
            results[member] = MemberResult(Counts(), StopReason.DRAINED)
        elif isinstance(result, Prepared):
            prepared.append(result)
    return results, prepared


def _kept(record: JobRecord | Dropped) -> tuple[str, str, str]:
    """What tells a job record apart from another: its kind (a record, a drop), its lane and name."""
    return (type(record).__name__, record.lane, record.name)
