"""Rosters: who holds a member's places until each leaves — a gate's admissions, a tenant lane's starts.

A gate records every admission (the execution's name and a digest of its token) before it
makes it; a lane that counts by message group records every start in its roster with the
start's own record. An entry is its execution's place until a release, an end, a check with
Step Functions or a whole listing of RUNNING executions says it left — never by age, so an
execution that runs for days still holds its place. A member's roster also keeps its jobs
held for their group's limit (`dispatcher.core.tenants.Hold`). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from dispatcher.core.counting import LIST_LAG_SECONDS, RunningListing
from dispatcher.core.executions import ACTIVE_STATUSES
from dispatcher.core.tenants import Hold

CHECK_AFTER_SECONDS = 30.0
"""An execution inside this long since its admission (or since Step Functions last said it
runs) is checked with Step Functions: one that ended without a release or an event that
reached the dispatcher leaves within this, the check's pace and AWS's own lag."""
RECONCILE_SECONDS = 30.0
"""How often a gate's roster is reconciled with a whole listing of its state machine's RUNNING
executions (when `ListExecutions`' pace allows): an execution inside that ended without a
word is freed within AWS's list lag, this and the listing's own pace, however many are
inside. Checks one at a time (`CHECK_AFTER_SECONDS`) are bounded by `DescribeExecution`'s
quota, 15 a second: 3,000 inside for ten minutes need 100."""
RECONCILE_MAX_AGE_SECONDS = 60.0
"""A roster not reconciled for this long is listed whether the pace has tokens or not: every
lane's count spends the same pace a page at a time, and would else keep a listing of many
pages waiting. The pace then waits out what it owes (the lanes reuse their listings)."""


class RosterEntry(BaseModel):
    """An execution holding a member's place: a tenant lane's start, a gate's admission (`core.gates`)."""

    model_config = ConfigDict(frozen=True)

    member: str
    """The lane or gate whose roster holds it."""
    name: str
    """The execution's name."""
    recorded_at: float
    """When it was recorded, just before its start (or admission): as the state table stores it."""
    state_machine_arn: str
    group: str | None = None
    """Its job's message group (None: not recorded)."""
    slots: int = 1
    """Its job's size: the slots of its group it holds (a gate's admission: 1)."""
    key: str = ""
    """Where a tenant lane's roster keeps it: its pack and place in it, or an item of its own (the
    name). A gate keeps each admission as an item named by the execution."""


Entry = TypeVar("Entry", bound=RosterEntry)


@dataclass(frozen=True)
class RosterRead:
    """A member's roster as read: its entries (a gate's marked confirmed or not), its stale confirmations."""

    entries: list[RosterEntry]
    stale: list[str]
    """Keys of confirmations that confirm no admission any more."""
    held: tuple[Hold, ...] = ()
    """The member's jobs held for their group's limit, one a group at most."""


@dataclass(frozen=True)
class Inside(Generic[Entry]):
    """A roster as one tick reads it: who still holds a place, who left by ending."""

    inside: tuple[Entry, ...]
    ended: tuple[Entry, ...] = ()
    """Admitted before the end a status change event reports: the place is free (forget the record)."""


def plan_inside(records: Iterable[Entry], ends: Mapping[str, float]) -> Inside[Entry]:
    """Who is inside: every admission recorded, unless its execution ended after it was admitted.

    ``ends``: execution name → the latest stop a status change event reported. An end
    before the admission is an earlier run's (the execution was redriven and entered
    again): the place stays.
    """
    inside: list[Entry] = []
    ended: list[Entry] = []
    for record in records:
        stopped_at = ends.get(record.name)
        if stopped_at is not None and stopped_at >= record.recorded_at:
            ended.append(record)
        else:
            inside.append(record)
    return Inside(tuple(inside), tuple(ended))


def due_checks(inside: Iterable[Entry], checked: Mapping[str, float], now: float) -> list[Entry]:
    """Executions inside long enough to ask Step Functions whether they still run, longest first.

    ``checked``: name → when Step Functions last said it runs.
    """
    due = [
        (max(record.recorded_at, checked.get(record.name, -math.inf)), record)
        for record in inside
        if max(record.recorded_at, checked.get(record.name, -math.inf)) + CHECK_AFTER_SECONDS <= now
    ]
    return [record for _, record in sorted(due, key=lambda pair: pair[0])]


def absent_from(inside: Iterable[Entry], listing: RunningListing) -> list[Entry]:
    """The executions inside that a whole listing of RUNNING should show and doesn't: they ended.

    Only those admitted at least `LIST_LAG_SECONDS` before the listing was read: an
    execution starts before it asks to enter, so by then the list shows it while it runs.
    One the list still shows after it ended (the other lag) keeps its place until a later
    listing, its event or a check. A redriven execution is listed again: it keeps its place.
    """
    if not listing.complete:
        return []
    return [
        record
        for record in inside
        if record.name not in listing.executions
        and record.recorded_at + LIST_LAG_SECONDS <= listing.listed_at
    ]


def still_inside(status: str | None) -> bool:
    """Whether a checked execution keeps its place: it runs, or no read shows it yet (a lag)."""
    return status is None or status in ACTIVE_STATUSES


def oldest_inside_seconds(inside: Collection[RosterEntry], now: float) -> float | None:
    """How long the longest-inside execution has been inside (None: nobody is)."""
    if not inside:
        return None
    return round(max(0.0, now - min(record.recorded_at for record in inside)), 3)


def group_counts(entries: Iterable[RosterEntry]) -> Counter[str]:
    """Each message group's slots held in a roster: its entries' sizes (an entry without a group: none)."""
    counts: Counter[str] = Counter()
    for entry in entries:
        if entry.group is not None:
            counts[entry.group] += entry.slots
    return counts
