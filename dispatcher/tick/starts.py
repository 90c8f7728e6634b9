"""Recording and starting one round's admitted messages: records first, then starts, one thread per group."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dispatcher.core.admission import Start, by_group
from dispatcher.core.batching import BATCH_WRITE_LIMIT, SQS_BATCH_LIMIT, chunks
from dispatcher.core.counting import LedgerRequest, LedgerStart, stored_time
from dispatcher.core.errors import (
    NotYetError,
    TransientError,
)
from dispatcher.core.jobs import Dropped, JobRecord
from dispatcher.core.outcomes import Outcome
from dispatcher.core.rosters import RosterEntry
from dispatcher.telemetry import logger
from dispatcher.tick.outcomes import GroupOutcome, RoundOutcome
from dispatcher.tick.ports import Roster, StartLedger, StartThreads
from dispatcher.tick.threads import first_failure


@dataclass(frozen=True)
class Recording:
    """What one member writes before its calls: its starts in the ledger, its entries in its roster."""

    ledger: LedgerRequest | None = None
    """A lane's starts (None: a gate's admissions, which only its roster keeps)."""
    entries: Sequence[RosterEntry] = ()


class MemberStarts(Protocol):
    """One member's part of a round's starts (a lane's, or a gate's): what it admitted, how it went."""

    @property
    def starts(self) -> Sequence[Start]:
        """What it admitted this round, in receive order."""
        ...

    @property
    def outcome(self) -> RoundOutcome:
        """What became of them."""
        ...

    @property
    def recorded(self) -> set[str]:
        """Names whose every record was written: only these may go."""
        ...

    def to_record(self, taken: set[tuple[str, str]], now: float) -> Recording:
        """What to write before the calls, as of ``now``; ``taken``: (state machine, name) recorded before."""
        ...

    def admit(self, start: Start, outcome: GroupOutcome) -> None:
        """Make one call; raise `TransientError` (back-pressure) or `NotYetError` (its group waits)."""
        ...


def by_roster(
    entries: Sequence[RosterEntry], rosters: Mapping[str, Roster]
) -> list[tuple[Roster, list[RosterEntry]]]:
    """Entries by the roster that keeps them (their member's), in order."""
    found: dict[int, tuple[Roster, list[RosterEntry]]] = {}
    for entry in entries:
        roster = rosters[entry.member]
        found.setdefault(id(roster), (roster, []))[1].append(entry)
    return list(found.values())


@dataclass(frozen=True)
class Write:
    """One call that writes some of a round's records: the ledger's starts, or 25 roster entries."""

    call: Callable[[Any], Sequence[LedgerStart | RosterEntry]]
    records: Sequence[LedgerStart | RosterEntry]

    def make(self) -> Sequence[LedgerStart | RosterEntry]:
        """Make the call; the records it left unprocessed."""
        return self.call(self.records)


def _identity(record: LedgerStart | RosterEntry) -> tuple[str, ...]:
    """What tells one record of a round apart: a start's sort key, an entry's member and name."""
    if isinstance(record, LedgerStart):
        return ("ledger", record.sort_key)
    return ("roster", record.member, record.name)


def _left_by(call: Write, result: object) -> Sequence[LedgerStart | RosterEntry]:
    """The records a call left: all of its own when it failed."""
    return call.records if isinstance(result, TransientError) else result  # type: ignore[return-value]


def _mark_written(lane: MemberStarts, left: set[tuple[str, ...]]) -> None:
    """What of a member's records was written may start; what was left stops admitting after the round."""
    written: list[LedgerStart | RosterEntry] = [*lane.outcome.recorded, *lane.outcome.entered]
    missing = {record.name for record in written if _identity(record) in left}
    if missing:
        lane.outcome.stop_reason = lane.outcome.stop_reason or (
            f"the state table left {len(missing)} start record(s) unprocessed"
        )
    # A start may go once each of its records is written (a tenant lane's roster has one too).
    lane.recorded.update(record.name for record in written if record.name not in missing)


class Starter:
    """Records a round's starts in the ledger and the rosters, then starts them, each group in send order.

    A round may hold several members' starts (lanes', gates'): their records are written
    together, and their groups share the start threads and the waves, as one round's
    groups do.
    """

    def __init__(self, pool: StartThreads, ledger: StartLedger, rosters: Mapping[str, Roster]) -> None:
        """``rosters``: each member's (members of one kind share one)."""
        self._pool = pool
        self._ledger = ledger
        self._rosters = rosters

    def record(
        self, lanes: Sequence[MemberStarts], now: float, kept: Sequence[JobRecord | Dropped] = ()
    ) -> list[JobRecord | Dropped]:
        """Write the round's starts to the ledger, its entries to the rosters (at ``now``); note what goes.

        A round's starts are a few items of 25, whatever their lanes, in one
        `BatchWriteItem`; roster entries, an item each, take calls of 25 of their own, made
        at once. A call still failing after retries (maybe written, maybe not) or records
        left unprocessed stop admitting after this round, and their messages don't start.
        An execution two lanes of one state machine both admit this round is recorded for
        the first: the other's waits for a later round (and is found started).

        ``kept``: the records of the round's jobs that never start, written in the ledger's
        `BatchWriteItem` after the starts. Those it wrote (none when there were no starts to
        record, or the call failed: the round writes the rest itself).
        """
        self._collect(lanes, stored_time(now))
        written: list[JobRecord | Dropped] = []
        calls = self._calls(lanes, kept, written)
        if not calls:
            return []
        try:
            left = self._unprocessed(calls)
        except TransientError as error:
            for lane in lanes:
                lane.outcome.stop_reason = lane.outcome.stop_reason or str(error)
            return written
        for lane in lanes:
            _mark_written(lane, left)
        return written

    def _collect(self, lanes: Sequence[MemberStarts], now: float) -> None:
        """Each member's ledger starts (from one ledger read for the round) and roster entries."""
        taken: set[tuple[str, str]] = set()
        recordings = [lane.to_record(taken, now) for lane in lanes]
        requests = [recording.ledger for recording in recordings if recording.ledger is not None]
        starts = iter(self._ledger.starts_of(requests, now) if requests else [])
        for lane, recording in zip(lanes, recordings, strict=True):
            lane.outcome.recorded = next(starts) if recording.ledger is not None else []
            lane.outcome.entered = list(recording.entries)

    def _calls(
        self,
        lanes: Sequence[MemberStarts],
        kept: Sequence[JobRecord | Dropped],
        written: list[JobRecord | Dropped],
    ) -> list[Write]:
        """The writes of the round's records: the ledger's (with ``kept``), calls of 25 for each roster's.

        ``written`` gets what of ``kept`` the ledger's call wrote.
        """
        ledger = [start for lane in lanes for start in lane.outcome.recorded]
        entries = [entry for lane in lanes for entry in lane.outcome.entered]

        def record(starts: Sequence[LedgerStart]) -> list[LedgerStart]:
            left = self._ledger.record(starts, kept)
            records = [record for record in left if not isinstance(record, LedgerStart)]
            written.extend(record for record in kept if record not in records)
            return [start for start in left if isinstance(start, LedgerStart)]

        return [
            *([Write(record, ledger)] if ledger else []),
            *(
                Write(roster.enter, chunk)
                for roster, those in by_roster(entries, self._rosters)
                for chunk in chunks(those, BATCH_WRITE_LIMIT)
            ),
        ]

    def _unprocessed(self, calls: Sequence[Write]) -> set[tuple[str, ...]]:
        """Make the calls (at once, when several); the records they left, as `_identity` says.

        A call that failed leaves all of its own. Raises when every call failed (as one call
        that failed), or what isn't back-pressure.
        """
        if len(calls) == 1:
            return {_identity(record) for record in calls[0].make()}
        written = self._pool.gather(Write.make, calls)
        failure = first_failure([result for result in written if not isinstance(result, TransientError)])
        if failure is not None:
            raise failure
        if all(isinstance(result, TransientError) for result in written):
            raise written[0]  # type: ignore[misc]  # every result is a TransientError here
        return {
            _identity(record)
            for call, result in zip(calls, written, strict=True)
            for record in _left_by(call, result)
        }

    def start(self, lanes: Sequence[MemberStarts]) -> None:
        """Start what each member recorded, concurrently across groups; raise what isn't back-pressure.

        The first wave is the first start of at most one receive batch of groups (invariant
        6), of every member together, and of no more groups than there are threads, so it
        is one call's wait: when the account is throttled, something else is spending the
        quota, and a round that sent every start thread out at once would answer with a
        whole round of throttled calls. Only once that wave came back without back-pressure
        do the rest run, on every start thread; a throttle among them stops the rest again,
        in every member (the quota is the account's). Each group's outcome goes to its member's.
        """
        stop = threading.Event()
        groups = [(lane, group) for lane in lanes for group in by_group(lane.starts)]
        wave = min(SQS_BATCH_LIMIT, self._pool.width)
        first = self._start_groups([(lane, group[:1]) for lane, group in groups[:wave]], stop)
        rest: list[tuple[MemberStarts, list[Start]]] = []
        for (lane, group), head in zip(groups, first, strict=False):
            lane.outcome.merge(head)
            if head.waiting:
                # The group's first start waits (or the wave stopped): so does the rest of it.
                lane.outcome.add(Outcome.WAITING, [start.message for start in group[1:]])
            elif len(group) > 1:
                rest.append((lane, group[1:]))
        later = rest + groups[wave:]
        for (lane, _), outcome in zip(later, self._start_groups(later, stop), strict=True):
            lane.outcome.merge(outcome)

    def _start_groups(
        self, groups: list[tuple[MemberStarts, list[Start]]], stop: threading.Event
    ) -> list[GroupOutcome]:
        """Start groups on the start threads, each in order; raise a failure that isn't back-pressure."""
        outcomes = self._pool.gather(lambda item: self._start_group(item[0], item[1], stop), groups)
        failure = first_failure(outcomes)
        if failure is not None:
            raise failure
        return outcomes  # type: ignore[return-value]  # no failure: every one is a GroupOutcome

    @staticmethod
    def _start_group(lane: MemberStarts, starts: list[Start], stop: threading.Event) -> GroupOutcome:
        """Start one group's messages in order; after a throttle anywhere, start no more."""
        outcome = GroupOutcome()
        for index, start in enumerate(starts):
            if start.unmade is not None:
                # A decision that makes no call (a job its producer cancelled): its outcome is said.
                outcome.add(start.unmade, [start.message])
                continue
            if stop.is_set() or start.name not in lane.recorded or not _admitted(lane, start, outcome, stop):
                outcome.add(Outcome.WAITING, [later.message for later in starts[index:]])
                break
        return outcome


def _admitted(lane: MemberStarts, start: Start, outcome: GroupOutcome, stop: threading.Event) -> bool:
    """Make one start's call; False when it and its group's later ones wait (not yet, or back-pressure)."""
    outcome.attempted.add(start.name)
    try:
        lane.admit(start, outcome)
    except NotYetError as error:
        # Nothing was started: the record can go, and the group waits for a later tick.
        outcome.attempted.discard(start.name)
        logger.info("waiting", extra={"execution": start.name, "reason": str(error)})
        return False
    except TransientError as error:
        stop.set()
        outcome.stop_reason = str(error)
        return False
    except BaseException:
        stop.set()
        raise
    return True
