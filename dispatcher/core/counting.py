"""Counting RUNNING: what holds a slot, from one listing, the recorded starts and the reported ends.

Time arrives as ``now`` (epoch seconds); nothing here reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from dispatcher.core.adaptive import LimitState
from dispatcher.core.events import EndedExecution
from dispatcher.core.executions import ACTIVE_STATUSES
from dispatcher.core.jobs import Cancellations
from dispatcher.core.sizes import Reservation, SizeEntry, weight
from dispatcher.core.topology import Pool, Topology

LIST_PAGE_SIZE = 1000
"""Every ListExecutions page asks for the most AWS returns: a call costs one token of a
small quota (5/s refill) whatever its size, and paging stops once MAX is counted."""
LIST_LAG_SECONDS = 60.0
"""ListExecutions may omit an execution for up to this long after it started (AWS's own lag)."""
RECENT_START_WINDOW_SECONDS = LIST_LAG_SECONDS + 30.0
"""ListExecutions may omit an execution for up to 60 s after it started; a start recorded by
a process that died before StartExecution must not hold a slot for longer than this, so the
window is the lag plus a margin for the start call itself. A record stops counting by its
age only once a listing read this long after it is in use (`review_from`): a listing reused
for a while doesn't shorten the margin."""


class LedgerStart(BaseModel):
    """A start the dispatcher recorded in its ledger just before `StartExecution` (or `RedriveExecution`)."""

    model_config = ConfigDict(frozen=True)

    name: str
    recorded_at: float
    sort_key: str
    state_machine_arn: str = Field(
        default="", description="Whose execution it is (empty: the state machine that keys the records)."
    )
    group: str | None = Field(default=None, description="The job's message group (for a restart).")
    redrive_count: int | None = Field(
        default=None, description="For a redrive: the execution's redriveCount before it (None for a start)."
    )
    lane: str | None = Field(
        default=None, description="The lane that started it, where a re-run goes (None: not recorded)."
    )
    slots: int = Field(default=1, description="The job's size (`Slots`), kept for a re-run of it.")


@dataclass(frozen=True)
class LedgerRequest:
    """One lane's starts of a round, to record in the ledger before they happen."""

    state_machine_arn: str
    groups: Mapping[str, str]
    """Execution name → its message group."""
    redrives: Mapping[str, int] = field(default_factory=dict)
    """Name → redriveCount before, for the executions redriven rather than started."""
    lane: str | None = None
    """The lane that starts these (a re-run of one goes back to it)."""
    slots: Mapping[str, int] = field(default_factory=dict)
    """Name → size, for the jobs of more than one slot."""


class StateWindow(BaseModel):
    """What the state table holds for the review window: recent starts and ended executions."""

    model_config = ConfigDict(frozen=True)

    starts: tuple[LedgerStart, ...] = ()
    """The starts that still count (a void written for one leaves it out)."""
    ended: tuple[EndedExecution, ...] = ()
    void: frozenset[str] = frozenset()
    """Sort keys of records that stopped counting: a start read earlier is left out too."""
    recorded: tuple[LedgerStart, ...] = ()
    """Every start read, voided or not: whether any tick recorded one (`dispatcher cancel`)."""
    cancellations: dict[str, Cancellations] = Field(default_factory=dict)
    """Each lane's pending cancellations (every read of the window brings them all)."""
    members: dict[str, dict[str, str]] | None = None
    """The members' queues as last recorded (`dispatcher.core.member_queues`); None: never recorded."""
    limits: dict[str, LimitState] = Field(default_factory=dict)
    """Each adaptive pool's limit as last written (`dispatcher.core.adaptive`); a pool without one: MAX."""
    sizes: dict[str, dict[str, SizeEntry]] = Field(default_factory=dict)
    """Each pool's sized executions (`dispatcher.core.sizes`): key → entry; a view: name → its slots."""
    slots: dict[str, int] = Field(default_factory=dict)
    """A state machine's view: its sized executions, name → slots (the rest take one each)."""
    reservations: dict[str, Reservation] = Field(default_factory=dict)
    """Each pool's reservation: the large job its freed slots are kept for (`dispatcher.core.sizes`)."""


REREAD_SECONDS = 2.0
"""A lease keeper that read the window already reads again only from this long before its
last read: every start record written since was its own (only the keeper records starts),
and an end written late is only an end learned later, which is safe."""


@dataclass
class KnownWindow:
    """The review window as one lease keeper has read it, so its later ticks read only what is new.

    Only while one invocation holds the lease without a break: a new keeper reads the
    whole window, since the previous keeper's starts are in it.
    """

    read_at: float
    """The clock just before the latest read."""
    starts: dict[str, LedgerStart] = field(default_factory=dict)
    """Sort key → the record."""
    ends: dict[EndedExecution, float] = field(default_factory=dict)
    """An end → when it was first read."""

    def rereads_from(self) -> float:
        """Where the next read begins."""
        return self.read_at - REREAD_SECONDS

    def add(self, window: StateWindow, read_at: float) -> None:
        """Fold in a read that began at ``read_at``."""
        self.read_at = read_at
        for record in window.starts:
            self.starts[record.sort_key] = record
        for key in window.void:
            self.starts.pop(key, None)
        for end in window.ended:
            self.ends.setdefault(end, read_at)

    def drop(self, records: Iterable[LedgerStart]) -> None:
        """Records that stopped counting (their void is written)."""
        for record in records:
            self.starts.pop(record.sort_key, None)

    def views(self, oldest: Mapping[str, float]) -> dict[str, StateWindow]:
        """Each state machine's window from its ``oldest`` (`review_from`), in one pass.

        What is older than the oldest of them is forgotten.
        """
        self._forget(min(oldest.values(), default=math.inf))
        starts: dict[str, list[LedgerStart]] = {arn: [] for arn in oldest}
        ended: dict[str, list[EndedExecution]] = {arn: [] for arn in oldest}
        for record in self.starts.values():
            arn = record.state_machine_arn
            if arn in oldest and record.recorded_at >= oldest[arn]:
                starts[arn].append(record)
        for end, seen in self.ends.items():
            arn = end.state_machine_arn
            if arn in oldest and seen >= oldest[arn]:
                ended[arn].append(end)
        return {arn: StateWindow(starts=tuple(starts[arn]), ended=tuple(ended[arn])) for arn in oldest}

    def _forget(self, since: float) -> None:
        """Forget what was recorded or seen before ``since``.

        In place: an end is a pydantic model, slow to hash, and building new dicts every
        tick hashed each end of the window again (a twentieth of the sim's time draining
        6,000 jobs under one lease).
        """
        for key in [key for key, record in self.starts.items() if record.recorded_at < since]:
            del self.starts[key]
        for end in [end for end, seen in self.ends.items() if seen < since]:
            del self.ends[end]


class RunningListing(BaseModel):
    """What `ListExecutions(statusFilter=RUNNING)` showed, and when it was asked."""

    model_config = ConfigDict(frozen=True)

    executions: dict[str, float | None] = Field(
        description="Name → redriveDate (epoch seconds) of each listed execution, None if never redriven."
    )
    complete: bool = Field(description="False when paging stopped early because MAX was reached.")
    listed_at: float = Field(description="The dispatcher's clock just before the first page was asked for.")
    oldest_started_at: float | None = Field(
        default=None,
        description=(
            "The earliest last (re)start among the listed executions: redriveDate if redriven,"
            " else startDate (epoch seconds)."
        ),
    )


def stored_time(moment: float) -> float:
    """A moment as the state table stores it (to the microsecond), so a record reads back equal."""
    return float(f"{moment:.6f}")


def review_from(now: float, listed_at: float | None) -> float:
    """The oldest record that may still count, with a listing read at ``listed_at`` in use.

    A record this old has had the lag and the start call's margin to show in that listing;
    a younger one (or any, without a listing) may still hold a slot the listing can't show.
    """
    return min(now, now if listed_at is None else listed_at) - RECENT_START_WINDOW_SECONDS


def free_slots(max_concurrency: int, running: int) -> int:
    """Executions the dispatcher may start now: never negative."""
    return max(0, max_concurrency - running)


@dataclass(frozen=True)
class Count:
    """What holds a slot under one count key (`Member.count_key`), as one tick counted it."""

    running: int
    """Executions holding a slot: a state machine's RUNNING ones, or those inside a gate."""
    oldest_seconds: float | None = None
    """How long the oldest of them has held its slot (None: unknown, or none)."""
    ended: Mapping[str, float] = field(default_factory=dict)
    """Execution name → when the start this count found ended (by `DescribeExecution`) was recorded:
    a roster entry of that run, or an earlier one, holds no place from this tick on."""
    learned: tuple[EndedExecution, ...] = ()
    """The ends `DescribeExecution` told this count (with their errors: an adaptive pool's signals)."""
    executions: int | None = None
    """How many executions ``running`` weighs (None: as many as its slots, each of one)."""
    names: frozenset[str] | None = None
    """The executions it found holding a slot (None: not known, as when counting stopped at MAX)."""

    @property
    def execution_count(self) -> int:
        """How many executions hold its slots."""
        return self.running if self.executions is None else self.executions


@dataclass(frozen=True)
class PoolCount:
    """One pool's RUNNING and free places, as the tick and `dispatcher status` both count them."""

    running: int
    free: int


def pool_running(topology: Topology, pool: str, running: Mapping[str, int]) -> int:
    """A pool's RUNNING: the counts of its members' distinct count keys (``running``, by key).

    A state machine that several lanes start is counted once; a gate counts its own roster.
    """
    return sum(
        running[key] for key in dict.fromkeys(member.count_key for member in topology.members_of(pool))
    )


def pool_count(pool: Pool, running: int) -> PoolCount:
    """A pool's RUNNING and free places, the one formula of the tick and of `dispatcher status`.

    Free: max(0, L - RUNNING), where L is an adaptive pool's limit and MAX otherwise
    (`Pool.ceiling`); 0 halted.
    """
    return PoolCount(running, 0 if pool.halted else free_slots(pool.ceiling, running))


@dataclass(frozen=True)
class RunningCount:
    """How many slots executions hold, as far as the listing and the state table tell."""

    running: int
    """The slots of listed executions that still run, plus of recorded starts that count without a check."""
    to_check: tuple[LedgerStart, ...] = ()
    """Recorded starts the list doesn't show: `DescribeExecution` tells whether each still runs."""
    resolved: tuple[LedgerStart, ...] = ()
    """Records that no longer count: too old to matter, superseded, or ended by an event.
    They need no write: the next tick's window read resolves them the same way (an end
    and a newer record are written after the record they resolve, so they stay in the
    window as long as it does), and the oldest have left the window."""
    names: frozenset[str] | None = None
    """The executions counted (the checked ones not yet among them); None: counting stopped at MAX."""
    executions: int = 0
    """How many executions ``running`` weighs (the checked ones not yet among them)."""


def latest_ends(ended: Iterable[EndedExecution]) -> dict[str, float]:
    """Name → the latest stop any status change event reported (events repeat and reorder)."""
    latest: dict[str, float] = {}
    for execution in ended:
        latest[execution.name] = max(execution.stopped_at, latest.get(execution.name, execution.stopped_at))
    return latest


def listed_as_running(redriven_at: float | None, stopped_at: float | None) -> bool:
    """Whether a listed execution holds a slot, given the latest stop an event reported for it.

    ``ListExecutions`` keeps listing an execution for a while after it ended, so one that
    an event says has ended doesn't count; unless the list shows it redriven after that
    stop, because then it is running again.
    """
    if stopped_at is None:
        return True
    return redriven_at is not None and redriven_at > stopped_at


def counted_names(executions: Mapping[str, float | None], ends: Mapping[str, float]) -> frozenset[str]:
    """The listed executions that hold a slot."""
    return frozenset(
        name for name, redriven_at in executions.items() if listed_as_running(redriven_at, ends.get(name))
    )


def plan_count(  # noqa: PLR0913, PLR0917 — each is one input of the count
    listing: RunningListing,
    ends: Mapping[str, float],
    recorded: Iterable[LedgerStart],
    max_concurrency: int,
    now: float,
    sizes: Mapping[str, int] | None = None,
) -> RunningCount:
    """Count RUNNING, in slots, from one listing, the ended executions and the recorded starts.

    ``sizes``: name → slots of the sized executions (`dispatcher.core.sizes`); one each otherwise.

    A listed execution counts unless an event says it ended (and it was not redriven
    since). A listing that stopped paging at MAX but now counts less than MAX (a reused
    read, with more ends known since) says nothing of the executions it didn't page
    through, so the count is MAX: nothing starts until a fresh read.

    Recorded starts: one older than the review window of the listing (`review_from`) is
    resolved: the listing shows it if it runs. A listed one is counted once, by the list,
    and its record is kept (a later read may omit it again within the lag). One recorded
    before the stop an event reports has ended. One recorded after the listing was asked
    for can't be in it, and counts as it is, however old the listing. Any other one is
    checked with `DescribeExecution`, oldest first. A name recorded twice (a redelivered
    message) is judged by its newest record, which holds the slot longest; the older
    record goes.
    """
    sizes = sizes or {}
    listed = counted_names(listing.executions, ends)
    listed_slots = weight(sizes, listed)
    if listed_slots >= max_concurrency:
        return RunningCount(listed_slots, names=listed if listing.complete else None, executions=len(listed))
    if not listing.complete:
        return RunningCount(max_concurrency, executions=len(listed))
    newest: dict[str, LedgerStart] = {}
    resolved: list[LedgerStart] = []
    oldest = review_from(now, listing.listed_at)
    for record in sorted(recorded, key=lambda record: record.recorded_at, reverse=True):
        if record.name in newest or record.recorded_at < oldest:
            resolved.append(record)
        else:
            newest[record.name] = record
    unlisted: list[str] = []
    to_check: list[LedgerStart] = []
    for name, record in newest.items():
        stopped_at = ends.get(name)
        if name in listed:
            continue
        if stopped_at is not None and record.recorded_at <= stopped_at:
            resolved.append(record)
        elif record.recorded_at > listing.listed_at:
            unlisted.append(name)
        else:
            to_check.append(record)
    return RunningCount(
        listed_slots + weight(sizes, unlisted),
        tuple(reversed(to_check)),
        tuple(resolved),
        listed | frozenset(unlisted),
        len(listed) + len(unlisted),
    )


def still_counts(
    status: str | None, record: LedgerStart, now: float, redrive_count: int | None = None
) -> bool:
    """Whether a recorded start the list doesn't show holds a slot.

    ``status`` and ``redrive_count`` are what `DescribeExecution` said, ``status`` None
    when the execution does not exist (its process may still be about to start it, or
    may have died). A recorded redrive counts like a start until the read shows the
    redrive (a ``redriveCount`` above the one the record was made at): a read that
    still shows the failure it redrives says nothing of the run that follows.
    """
    if record.redrive_count is not None and (redrive_count or 0) <= record.redrive_count:
        status = None
    if status is None:
        return now - record.recorded_at <= RECENT_START_WINDOW_SECONDS
    return status in ACTIVE_STATUSES
