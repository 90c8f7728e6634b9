"""The count: how many executions hold a slot, from Step Functions and the state table.

`ListExecutions` is eventually consistent both ways, so the list is corrected with what
the state table remembers: starts recorded in the last 90 s that the list doesn't show
yet, and ends that status change events reported while the list still shows them.
A recorded start neither the list nor an event resolves is checked with
`DescribeExecution`, within a pace well below that API's quota. While one invocation
holds the lease, its ticks after the first read only the window's newest records.

A listing may be reused for up to 30 s when `ListExecutions`' pace, shared by every
state machine of the account, has no token for a fresh one: what happened since is known
without it (the starts recorded since count, however old; the ends come from events), so
the count stays an upper bound and only corrections wait (an end whose event was lost, an
execution started outside the dispatcher, a start that never reached Step Functions).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dispatcher.core.adaptive import LimitState
from dispatcher.core.counting import (
    LIST_PAGE_SIZE,
    Count,
    KnownWindow,
    LedgerStart,
    RunningListing,
    StateWindow,
    latest_ends,
    plan_count,
    review_from,
    still_counts,
)
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.core.executions import ExecutionState, execution_arn
from dispatcher.core.jobs import Cancellations
from dispatcher.core.member_queues import Queues, removed, to_record
from dispatcher.core.pacing import LISTING_MAX_AGE_SECONDS
from dispatcher.core.sizes import CheckedCount, Reservation, SizeEntry, pooled_sizes
from dispatcher.telemetry import logger
from dispatcher.tick.ports import Executions, MemberQueueRecords, StartLedger, StateReads
from dispatcher.tick.warm import WarmState


@dataclass(frozen=True)
class Snapshot:
    """One tick's read of the state table (one Query), each phase's part apart.

    The count takes the state machines' windows, adapting the pools' limits, the screens
    the cancellations; a start that may have been made before asks `in_window`.
    """

    windows: Mapping[str, StateWindow]
    """State machine ARN → its review window: the starts that still count, the ends."""
    limits: Mapping[str, LimitState]
    """Each adaptive pool's limit as last written; a pool without one: MAX."""
    cancellations: Mapping[str, Cancellations]
    """Each lane's pending cancellations (every read brings them all)."""
    known: KnownWindow
    """The window as this keeper has read it (a start voided since drops out)."""
    sizes: Mapping[str, Mapping[str, SizeEntry]] = field(default_factory=dict)
    """Each pool's sized executions (`dispatcher.core.sizes`), key → entry."""
    reservations: Mapping[str, Reservation] = field(default_factory=dict)
    """Each pool's reservation: the large job its freed slots are kept for."""

    def in_window(self, state_machine_arn: str, name: str) -> bool:
        """Whether the window holds a start record of that execution."""
        return any(
            record.name == name and record.state_machine_arn == state_machine_arn
            for record in self.known.starts.values()
        )


class Records:
    """The state table's window, every state machine's at once: read once a tick, in one partition.

    While one invocation holds the lease without a break, its ticks after the first read
    only the window's newest records.
    """

    def __init__(
        self,
        reads: StateReads,
        ledger: StartLedger,
        member_queues: MemberQueueRecords,
        members: Queues | None = None,
    ) -> None:
        """``members``: every configured member's queues, kept in the table (None: not kept)."""
        self._reads = reads
        self._ledger = ledger
        self._member_queues = member_queues
        self._members = members
        self._holding = False
        self._known: KnownWindow | None = None

    def note_ends(self, ended: Sequence[EndedExecution], now: float) -> None:
        """Keep the events' news for the ticks of the next minute and a half (written as of ``now``)."""
        logger.info(
            "executions ended",
            extra={"executions": [(end.name, end.stopped_at) for end in ended]},
        )
        try:
            left = self._ledger.note_ended(ended, now)
        except TransientError as error:
            left, reason = len(ended), str(error)
        else:
            reason = "the state table left them unprocessed"
        if left:
            # This tick still uses the news; later ticks count those executions until the
            # list stops showing them, which is safe.
            logger.warning("could not record every end", extra={"left": left, "reason": reason})

    def lease_taken(self) -> None:
        """The lease is held from now on, without a break: later reads of the window may be partial."""
        self._holding = True

    def lease_ended(self) -> None:
        """The lease is no longer held: the next read is whole."""
        self._holding = False
        self._known = None

    def read(self, now: float, oldest: Mapping[str, float]) -> Snapshot:
        """The table as of ``now``: each state machine's window from its ``oldest`` (`review_from`), one read.

        Read whole, or, while the lease is held throughout, what is new. Read a moment
        before the count, the window is still whole: only the lease keeper records
        starts, and an end written meanwhile is only learned a tick later, which is safe.
        """
        since = min(oldest.values())
        if self._known is None or not self._holding:
            known = KnownWindow(read_at=now)
            window = self._reads.window(since)
            if self._holding:
                self._known = known
        else:
            known = self._known
            window = self._reads.window(max(since, known.rereads_from()))
        known.add(window, now)
        self._keep_members(window.members)
        views = known.views(oldest)
        if window.sizes:
            views = {
                arn: view.model_copy(update={"slots": pooled_sizes(window.sizes, arn)})
                for arn, view in views.items()
            }
        return Snapshot(views, window.limits, window.cancellations, known, window.sizes, window.reservations)

    def _keep_members(self, recorded: Mapping[str, Mapping[str, str]] | None) -> None:
        """Keep the members' queues (a write only when they changed); warn of members gone from ``LANES``."""
        if self._members is None:
            return
        gone = removed(recorded or {}, self._members)
        if gone:
            logger.warning(
                "members no longer in LANES: nothing receives from their queues, where their jobs wait",
                extra={"members": gone, "fix": "add them back to LANES; `dispatcher forget` once empty"},
            )
        updated = to_record(recorded, self._members)
        if updated is None:
            return
        try:
            self._member_queues.record_members(updated)
        except TransientError as error:  # kept by a later tick: never a reason to stop this one
            logger.warning("could not keep the members' queues", extra={"reason": str(error)})
        else:
            self._members = None  # kept: this invocation's later ticks read it back

    def void(self, records: Sequence[LedgerStart], now: float) -> None:
        """Void starts that no longer count (best effort: see `StartLedger.void`)."""
        self._ledger.void(records, now)
        if self._known is not None:
            self._known.drop(records)


class MemberCounter(Protocol):
    """What counts under one count key: a lane's state machine (`Counter`) or a gate (`GateCounter`)."""

    @property
    def count_key(self) -> str:
        """What its count is kept under (`Member.count_key`)."""
        ...

    @property
    def state_machine_arn(self) -> str:
        """The state machine whose executions it counts (a gate: those inside its section)."""
        ...

    def ensure_standard(self) -> None:
        """Refuse an EXPRESS (or missing) state machine; a warm container checks once."""
        ...

    def review_from(self, now: float) -> float:
        """The oldest record of its state machine's window its count may need as of ``now``."""
        ...

    def count(self, window: StateWindow, ended: Sequence[EndedExecution] = ()) -> Count:
        """What holds a slot under its key, from its state machine's window and the ends told."""
        ...


class Counter:
    """Counts the executions of one state machine that hold a slot, at most MAX of them."""

    def __init__(  # noqa: PLR0913 — each is one input of the count
        self,
        state_machine: Executions,
        records: Records,
        warm: WarmState,
        *,
        max_concurrency: int,
        list_reuse_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self._state_machine = state_machine
        self._records = records
        self._warm = warm
        self.max_concurrency = max_concurrency
        """Its pool's MAX: counting stops there (set again when the operator changes it live)."""
        self._list_reuse_seconds = list_reuse_seconds
        self._clock = clock

    def ensure_standard(self) -> None:
        """Refuse an EXPRESS (or missing) state machine; a warm container checks once."""
        arn = self._state_machine.arn
        if arn not in self._warm.standard:
            self._state_machine.ensure_standard()
            self._warm.standard.add(arn)

    @property
    def state_machine_arn(self) -> str:
        """The state machine it counts."""
        return self._state_machine.arn

    @property
    def count_key(self) -> str:
        """Its state machine (`Lane.count_key`)."""
        return self._state_machine.arn

    def review_from(self, now: float) -> float:
        """The oldest record its count may need as of ``now`` (that of its latest listing)."""
        last = self._warm.listing(self._state_machine.arn, now, LISTING_MAX_AGE_SECONDS)
        return review_from(now, None if last is None else last.listed_at)

    def count(self, window: StateWindow, ended: Sequence[EndedExecution] = ()) -> Count:
        """RUNNING: the list, less executions known to have ended, plus recorded starts it doesn't show.

        ``window``: its state machine's, as `Records.windows` read it a moment before.
        """
        now = self._clock()
        arn = self._state_machine.arn
        last = self._warm.listing(arn, now, LISTING_MAX_AGE_SECONDS)
        ends = latest_ends([*window.ended, *ended])
        listing = self._warm.listing(arn, now, self._list_reuse_seconds)
        if listing is None:
            listing = self._read_listing(last, ends, now)
        planned = plan_count(listing, ends, window.starts, self.max_concurrency, now, window.slots)
        oldest = None
        if listing.complete and listing.oldest_started_at is not None:
            oldest = round(max(0.0, now - listing.oldest_started_at), 3)
        learned: list[EndedExecution] = []
        checked = CheckedCount(
            planned.running, set(planned.names or ()), planned.executions, complete=planned.names is not None
        )
        resolved = self._check_recorded(
            planned.to_check, checked, now, listing.listed_at, learned, window.slots
        )
        if resolved:
            self._records.void(resolved, now)
        return Count(
            checked.running,
            oldest,
            {start.name: start.recorded_at for start in resolved},
            tuple(learned),
            executions=None if not window.slots else checked.executions,
            names=frozenset(checked.names) if checked.complete else None,
        )

    def _read_listing(
        self, last: RunningListing | None, ends: Mapping[str, float], now: float
    ) -> RunningListing:
        """A fresh listing, or, while the `ListExecutions` pace has no tokens for one, the last one."""
        arn = self._state_machine.arn
        pace = self._warm.paces_for(arn).list
        pages = 1 if last is None else max(1, math.ceil(len(last.executions) / LIST_PAGE_SIZE))
        if last is not None and not pace.ready(now, pages):
            return last
        listing = self._state_machine.list_running(self.max_concurrency, ends, listed_at=now)
        pace.reserve(now, pages)
        self._warm.keep(arn, listing)
        return listing

    def _still_counts(
        self, state: ExecutionState | None, record: LedgerStart, execution: str, now: float
    ) -> bool:
        """Whether a checked start still counts (one seen running is remembered, to count without a check)."""
        if state is None:
            return still_counts(None, record, now)
        counts = still_counts(state.status, record, now, state.redrive_count)
        if counts and record.redrive_count is None:  # a start, seen running
            self._warm.saw_running(execution, now)
        return counts

    def _check_recorded(  # noqa: PLR0913, PLR0917 — each is one input of the checks
        self,
        to_check: Sequence[LedgerStart],
        checked: CheckedCount,
        now: float,
        listed_at: float,
        learned: list[EndedExecution],
        sizes: Mapping[str, int],
    ) -> list[LedgerStart]:
        """Add the recorded starts to check to ``checked``, oldest first, until MAX; those that ended.

        Each check is a `DescribeExecution` within its pace. Those left unchecked by the
        pace or by a failed read count as running, as an unknown state does: the cap never
        depends on a read that was not made or failed. They are checked on later ticks,
        and stop counting when an end event or the list tells, or after the review window.
        One a check since the listing was read (``listed_at``) saw running counts without
        another: the listing in use can't tell more, and a fresher one that doesn't show
        it has it checked again. Each weighs its size (``sizes``; one otherwise).
        """
        pace = self._warm.paces_for(self._state_machine.arn).describe
        resolved: list[LedgerStart] = []
        for index, record in enumerate(to_check):
            if checked.running >= self.max_concurrency:
                checked.complete = False
                break
            execution = execution_arn(self._state_machine.arn, record.name)
            if record.redrive_count is None and self._warm.running_since(execution, listed_at):
                checked.add(record.name, sizes)
                continue
            if not pace.take(now, 1):
                logger.info("checks of recorded starts paced", extra={"left": len(to_check) - index})
                checked.add_all([left.name for left in to_check[index:]], sizes)
                return resolved
            try:
                state = self._state_machine.state_of(record.name)
            except TransientError as error:
                logger.warning("could not check recorded starts", extra={"reason": str(error)})
                checked.add_all([left.name for left in to_check[index:]], sizes)
                return resolved
            if self._still_counts(state, record, execution, now):
                checked.add(record.name, sizes)
            else:
                resolved.append(record)
                learned += self._ended(record, state)
        return resolved

    def _ended(self, record: LedgerStart, state: ExecutionState | None) -> list[EndedExecution]:
        """The end a check of a recorded start learned, if it learned one."""
        if state is None or state.stopped_at is None:
            return []
        return [
            EndedExecution(
                name=record.name,
                stopped_at=state.stopped_at,
                state_machine_arn=self._state_machine.arn,
                error=state.error,
            )
        ]


def oldest_needed(counters: Sequence[MemberCounter], now: float) -> dict[str, float]:
    """Each counted state machine's oldest record the window must hold, the oldest any counter needs."""
    oldest: dict[str, float] = {}
    for counter in counters:
        arn = counter.state_machine_arn
        oldest[arn] = min(oldest.get(arn, math.inf), counter.review_from(now))
    return oldest


def known_ends(
    snapshot: Snapshot, told: Mapping[str, Sequence[EndedExecution]], counts: Mapping[str, Count]
) -> dict[str, tuple[EndedExecution, ...]]:
    """Each state machine's ends this tick knows: the window's, the events', `DescribeExecution`'s."""
    return {
        arn: (*window.ended, *told.get(arn, ()), *(counts[arn].learned if arn in counts else ()))
        for arn, window in snapshot.windows.items()
    }
