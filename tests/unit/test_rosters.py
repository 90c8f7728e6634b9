"""Rosters without AWS: who still holds a place, what is checked, confirmed and freed by a listing."""

from __future__ import annotations

import math

import pytest

from dispatcher.core.counting import LIST_LAG_SECONDS, RunningListing
from dispatcher.core.gates import Confirmation, GateEntry, confirmed, token_digest
from dispatcher.core.rosters import (
    CHECK_AFTER_SECONDS,
    RosterEntry,
    absent_from,
    due_checks,
    group_counts,
    oldest_inside_seconds,
    plan_inside,
    still_inside,
)

NOW = 1_800_000_000.0
GATED = "arn:aws:states:us-east-1:123456789012:stateMachine:ingest"
TOKEN = "task-token"


def admission(name: str, at: float = NOW, token: str = TOKEN, *, done: bool = True) -> GateEntry:
    """Gate ``g``'s admission of ``name`` at ``at``."""
    return GateEntry(
        member="g",
        name=name,
        recorded_at=at,
        state_machine_arn=GATED,
        token=token_digest(token),
        confirmed=done,
    )


def test_an_end_after_the_admission_frees_the_place_an_earlier_runs_end_does_not() -> None:
    """An end before the admission is of a run before the execution entered again: its place stays."""
    planned = plan_inside(
        [admission("a", 100.0), admission("b", 100.0), admission("c", 100.0)], {"a": 100.0, "b": 99.9}
    )
    assert [record.name for record in planned.inside] == ["b", "c"]
    assert [record.name for record in planned.ended] == ["a"]


def test_checks_are_due_for_those_inside_long_enough_longest_first_each_again_later() -> None:
    """Checks are due for those inside long enough, longest first, each again later."""
    inside = [admission("young", NOW - 5), admission("old", NOW - 100), admission("middle", NOW - 40)]
    assert [record.name for record in due_checks(inside, {}, NOW)] == ["old", "middle"]
    checked = {"old": NOW - 1, "middle": NOW - CHECK_AFTER_SECONDS}
    assert [record.name for record in due_checks(inside, checked, NOW)] == ["middle"]


def test_a_whole_listing_frees_those_it_should_show_and_does_not_after_the_lists_lag() -> None:
    """Absent from a whole listing read a lag after its admission: it ended. Else its place stays."""
    inside = [
        admission("ended", NOW - LIST_LAG_SECONDS),
        admission("young", NOW - LIST_LAG_SECONDS + 1),
        admission("runs", NOW - 600),
        admission("redriven", NOW - 600),
    ]
    listing = RunningListing(executions={"runs": None, "redriven": NOW - 5}, complete=True, listed_at=NOW)
    assert [record.name for record in absent_from(inside, listing)] == ["ended"]
    partial = listing.model_copy(update={"complete": False})
    assert absent_from(inside, partial) == []


@pytest.mark.parametrize(
    ("status", "inside"),
    [("RUNNING", True), ("PENDING_REDRIVE", True), (None, True), ("SUCCEEDED", False), ("ABORTED", False)],
)
def test_a_checked_execution_keeps_its_place_while_it_runs_or_no_read_shows_it(
    status: str | None, inside: bool
) -> None:
    """A checked execution keeps its place while it runs or no read shows it."""
    assert still_inside(status) is inside


def test_a_confirmation_marks_the_admissions_it_follows_and_is_stale_once_none_is_left() -> None:
    """A confirmation marks the admissions it follows, and is stale once none is left."""
    records = [
        admission("a", 10.0, done=False),
        admission("b", 10.0, done=False),
        admission("c", 30.0, done=False),
    ]
    confirmations = [
        Confirmation("k1", 20.0, frozenset({"a", "c"})),  # c entered again after it: not c's
        Confirmation("k2", 20.0, frozenset({"gone"})),
        Confirmation("k3", 40.0, frozenset({"c", "gone"})),
    ]
    marked, stale = confirmed(records, confirmations)
    assert [(record.name, record.confirmed) for record in marked] == [("a", True), ("b", False), ("c", True)]
    assert stale == ["k2"]


def test_how_long_the_longest_inside_has_been_inside() -> None:
    """How long the longest inside has been inside."""
    assert oldest_inside_seconds([], NOW) is None
    assert oldest_inside_seconds([admission("a", NOW - 3.5), admission("b", NOW - 1)], NOW) == 3.5
    assert oldest_inside_seconds([admission("a", NOW + 1)], NOW) == 0.0
    assert not math.isnan(oldest_inside_seconds([admission("a", NOW)], NOW) or 0.0)


def test_group_counts_come_from_the_roster_records() -> None:
    """Group counts come from the roster records."""
    records = [
        RosterEntry(member="lane", name=name, recorded_at=0.0, state_machine_arn=GATED, group=group)
        for name, group in (("x", "a"), ("y", "a"), ("z", "b"))
    ]
    ungrouped = RosterEntry(member="lane", name="w", recorded_at=0.0, state_machine_arn=GATED)
    assert group_counts([*records, ungrouped]) == {"a": 2, "b": 1}
