"""Tenants in a tick: each member's roster read as counts per message group, and its held jobs.

A lane that counts by message group (``max_per_group`` or ``fair_share``) keeps a roster
as a gate does: an item per execution it started, written with the start's record and
kept until the execution is known to have ended — by its status change event, by a whole
listing of RUNNING that no longer shows it (read at least AWS's list lag after the start),
never by age. So an execution that runs for days still counts in its group. A gate's
roster is the one it counts its executions inside with.

Each member's `GroupBook` for the tick holds each group's count (this tick's starts
added as they happen) and its held jobs: those whose group dropped below its limit are
shown again first, so they start in this very tick.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dispatcher.core.counting import LIST_PAGE_SIZE, RunningListing, StateWindow, latest_ends
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.core.executions import execution_arn
from dispatcher.core.jobs import hold_seconds, job_name
from dispatcher.core.messages import QueuedMessage, size_of
from dispatcher.core.pacing import LISTING_MAX_AGE_SECONDS
from dispatcher.core.rosters import (
    RECONCILE_MAX_AGE_SECONDS,
    RECONCILE_SECONDS,
    Entry,
    absent_from,
    group_counts,
    plan_inside,
)
from dispatcher.core.tenants import HOLD_SECONDS, Hold, Share, due_to_show, group_full, held_key
from dispatcher.core.topology import Lane, Member
from dispatcher.telemetry import logger
from dispatcher.tick.ports import Executions, JobQueue, Roster
from dispatcher.tick.warm import Reconciliation, WarmState


def reconciled(  # noqa: PLR0913 — each is one input of the reconciliation
    member: str,
    executions: Executions,
    warm: WarmState,
    inside: Sequence[Entry],
    now: float,
    *,
    listing: RunningListing | None = None,
) -> list[Entry]:
    """The records of a roster that a whole listing of RUNNING, read now, shows ended.

    ``listing``: a whole listing read since the roster's last reconciliation, if the
    count has one (a lane's count lists its state machine anyway): it is used instead.
    Else every `RECONCILE_SECONDS` at most, within `ListExecutions`' pace, which every
    lane's count shares: a listing of many pages is paid for over the next seconds. It
    waits while the pace has no tokens for it, up to `RECONCILE_MAX_AGE_SECONDS`. Those
    the listing shows count as seen running (no check for a while). A listing that fails
    is tried on a later tick.
    """
    machine = executions.arn
    last = warm.reconciled.get(member)
    if listing is not None and listing.complete and (last is None or listing.listed_at > last.at):
        warm.reconciled[member] = Reconciliation(at=listing.listed_at, pages=0)
        return absent_from(inside, listing)
    age = math.inf if last is None else now - last.at
    if not inside or age < RECONCILE_SECONDS:
        return []
    pace = warm.paces_for(machine).list
    if age < RECONCILE_MAX_AGE_SECONDS and last is not None and not pace.ready(now, max(1, last.pages)):
        return []
    try:
        listing = executions.list_running(None, {}, listed_at=now)
    except TransientError as error:
        logger.warning("could not list a roster's executions", extra={"member": member, "reason": str(error)})
        return []
    pages = max(1, math.ceil(len(listing.executions) / LIST_PAGE_SIZE))
    pace.reserve(now, pages)
    warm.reconciled[member] = Reconciliation(at=now, pages=pages)
    for record in inside:
        if record.name in listing.executions:
            warm.saw_running(execution_arn(machine, record.name), now)
    return absent_from(inside, listing)


@dataclass
class GroupBook:
    """One member's message groups in one tick: how many each holds, and its held jobs."""

    member: Member
    share: Share
    running: Counter[str]
    """Group → the slots its executions hold of the member's (this tick's starts added)."""
    holds: dict[str, Hold] = field(default_factory=dict)
    """Group → its job held for the group's limit."""
    roster: Roster | None = None
    clock: Callable[[], float] = lambda: 0.0
    sized: bool = False
    """Whether its jobs weigh their ``Slots`` (a lane's); a gate's requests take one place each."""

    @property
    def at_limit(self) -> int:
        """Groups at the member's limit now."""
        limit = self.share.max_per_group
        return 0 if limit is None else sum(1 for count in self.running.values() if count >= limit)

    @property
    def largest_share(self) -> float | None:
        """The share of the member's slots held that its largest group holds (None: it holds none)."""
        total = sum(self.running.values())
        return None if not total else round(max(self.running.values()) / total, 4)

    def at_limit_of(self, messages: Iterable[QueuedMessage]) -> list[QueuedMessage]:
        """Of these jobs, those whose group lacks room for their size now."""
        return [
            message
            for message in messages
            if group_full(self.share, self.running[message.group_id], self._size(message))
        ]

    def started(self, messages: Iterable[QueuedMessage]) -> None:
        """Executions of these jobs hold their sizes from now on."""
        for message in messages:
            self.running[message.group_id] += self._size(message)

    def _size(self, message: QueuedMessage) -> int:
        """The places of its group a job takes: its size in a lane, one in a gate."""
        return size_of(message) if self.sized else 1

    def show_due(self, queue: JobQueue) -> int:
        """Show again the held jobs whose group has room for their size now; how many (best effort).

        A job shown whose item can't be deleted is shown again next tick: by then its
        receipt handle is stale, which changes nothing.
        """
        due = due_to_show(self.holds.values(), self.running, self.share)
        if not due or self.roster is None:
            return 0
        messages = [
            QueuedMessage(
                message_id=hold.message_id, receipt_handle=hold.receipt_handle, body="", group_id=hold.group
            )
            for hold in due
        ]
        try:
            queue.make_visible(messages)
        except TransientError as error:
            logger.warning(
                "could not show held jobs", extra={"member": self.member.name, "reason": str(error)}
            )
            return 0
        for hold in due:
            del self.holds[hold.group]
        self.roster.tidy(self.member, [held_key(hold.group) for hold in due])
        logger.info(
            "held jobs shown again",
            extra={"member": self.member.name, "groups": [hold.group for hold in due]},
        )
        return len(due)

    def hold(self, queue: JobQueue, messages: Sequence[QueuedMessage]) -> list[QueuedMessage]:
        """Hold jobs whose group is at its limit: noted in the roster, then in flight for `HOLD_SECONDS`.

        Those that could not be held (the note or the call failed); they are shown again as any
        other job that waits. Noted first: a tick that dies after the call leaves the note,
        so the job is shown again when its group drops below its limit.
        """
        if not messages or self.roster is None:
            return list(messages)
        now = self.clock()
        holds = [
            Hold(
                message.group_id,
                message.message_id,
                message.receipt_handle,
                now,
                job_name(message),
                slots=self._size(message),
            )
            for message in messages
        ]
        try:
            self.roster.hold(self.member, holds)
        except TransientError as error:
            logger.warning(
                "could not note held jobs", extra={"member": self.member.name, "reason": str(error)}
            )
            return list(messages)
        failed = self._hide(queue, messages, now)
        failed_ids = {message.message_id for message in failed}
        for hold in holds:
            if hold.message_id not in failed_ids:
                self.holds[hold.group] = hold
        logger.info(
            "jobs held for their group's limit",
            extra={"member": self.member.name, "groups": [hold.group for hold in holds]},
        )
        return list(failed)

    def _hide(self, queue: JobQueue, messages: Sequence[QueuedMessage], now: float) -> list[QueuedMessage]:
        """Put held jobs in flight for `HOLD_SECONDS`, or until just past their deadline; those not hidden."""
        by_seconds: dict[int, list[QueuedMessage]] = {}
        for message in messages:
            seconds = hold_seconds(message, now, HOLD_SECONDS, self.member.max_wait_seconds)
            by_seconds.setdefault(seconds, []).append(message)
        return [failed for seconds, those in by_seconds.items() for failed in queue.hide(those, seconds)]


class LaneRoster:
    """A tenant lane's roster in a tick: its executions still running, by message group."""

    def __init__(
        self,
        lane: Lane,
        executions: Executions,
        roster: Roster,
        warm: WarmState,
        clock: Callable[[], float],
    ) -> None:
        self._lane = lane
        self._executions = executions
        self._roster = roster
        self._warm = warm
        self._clock = clock

    def book(
        self,
        share: Share,
        window: StateWindow,
        ended: Sequence[EndedExecution] = (),
        counted_ended: Mapping[str, float] | None = None,
    ) -> GroupBook:
        """The lane's groups now: its roster, less what ended (an event, the count's check, a listing).

        ``window``: its state machine's, as the tick's count read it (its ends);
        ``counted_ended``: the runs the tick's count found ended (`Count.ended`), so a group's
        place comes back in the very tick its slot in the pool does.
        """
        now = self._clock()
        read = self._roster.read(self._lane)
        planned = plan_inside(read.entries, latest_ends([*window.ended, *ended]))
        listing = self._warm.listing(self._executions.arn, now, LISTING_MAX_AGE_SECONDS)
        checked = counted_ended or {}
        left = list(planned.ended) + [
            entry
            for entry in planned.inside
            if entry.name in checked and entry.recorded_at <= checked[entry.name]
        ]
        gone = {entry.name for entry in left}
        left += reconciled(
            self._lane.name,
            self._executions,
            self._warm,
            [entry for entry in planned.inside if entry.name not in gone],
            now,
            listing=listing,
        )
        if left:
            logger.info(
                "ended: left the lane's roster",
                extra={"lane": self._lane.name, "executions": [r.name for r in left]},
            )
            self._roster.leave(left)
        gone = {record.name for record in left}
        running = group_counts(record for record in planned.inside if record.name not in gone)
        return GroupBook(
            self._lane,
            share,
            running,
            {hold.group: hold for hold in read.held},
            self._roster,
            self._clock,
            sized=True,
        )


def books_total(books: Mapping[str, GroupBook]) -> tuple[int, int, float | None]:
    """Held jobs, groups at their limit, and the largest group's share over every member's book."""
    held = sum(len(book.holds) for book in books.values())
    at_limit = sum(book.at_limit for book in books.values())
    shares = [share for book in books.values() if (share := book.largest_share) is not None]
    return held, at_limit, max(shares, default=None)


class Tenants:
    """Every tenant member's `GroupBook`, read again each tick: each kind reads its own (`KindTick.books`)."""

    def __init__(self) -> None:
        self.books: dict[str, GroupBook] = {}
        """Member → its groups this tick (a member that doesn't count by group has none)."""

    def read(self, books: Iterable[tuple[str, GroupBook, JobQueue]]) -> None:
        """Keep these books (member, book, its queue); show again their held jobs whose group has room."""
        self.books.clear()
        queues: dict[str, JobQueue] = {}
        for name, book, queue in books:
            self.books[name] = book
            queues[name] = queue
        for name, book in self.books.items():
            book.show_due(queues[name])
