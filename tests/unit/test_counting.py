"""Counting RUNNING: free slots, the listing, ended executions and recorded starts — no AWS, no clock."""

from __future__ import annotations

import pytest

from dispatcher.core.counting import (
    RECENT_START_WINDOW_SECONDS,
    LedgerStart,
    RunningCount,
    RunningListing,
    free_slots,
    latest_ends,
    listed_as_running,
    plan_count,
    review_from,
    still_counts,
)
from dispatcher.core.events import EndedExecution

NOW = 1_800_000_000.0


def record(name: str, age: float) -> LedgerStart:
    """A start record ``age`` seconds old."""
    return LedgerStart(name=name, recorded_at=NOW - age, sort_key=f"{NOW - age}#{name}")


@pytest.mark.parametrize(
    ("max_concurrency", "running", "expected"),
    [(5, 2, 3), (5, 5, 0), (5, 7, 0), (0, 0, 0), (1000, 1, 999)],
)
def test_free_slots_is_max_minus_running_never_negative(
    max_concurrency: int, running: int, expected: int
) -> None:
    """Free slots are MAX - N, and zero when N already reaches MAX."""
    assert free_slots(max_concurrency, running) == expected


def listing(*names: str, complete: bool = True, age: float = 0.0, **redriven: float) -> RunningListing:
    """A RUNNING listing of ``names`` (``redriven``: name → seconds since its redrive)."""
    executions: dict[str, float | None] = dict.fromkeys(names)
    executions.update({name: NOW - ago for name, ago in redriven.items()})
    return RunningListing(executions=executions, complete=complete, listed_at=NOW - age)


def ended(name: str, ago: float) -> EndedExecution:
    """An end of ``name``, ``ago`` seconds ago."""
    return EndedExecution(name=name, stopped_at=NOW - ago)


def test_plan_count_keeps_listed_and_checks_unlisted() -> None:
    """A listed start is neither checked nor forgotten (a later list may omit it); unlisted is checked."""
    count = plan_count(listing("seen"), {}, [record("seen", 5), record("unseen", 5)], 10, NOW)
    assert count.running == 1
    assert count.resolved == ()
    assert [r.name for r in count.to_check] == ["unseen"]


def test_plan_count_resolves_records_older_than_window() -> None:
    """A record older than the window no longer counts: the list is consistent by then."""
    count = plan_count(listing(), {}, [record("old", RECENT_START_WINDOW_SECONDS + 1)], 10, NOW)
    assert [r.name for r in count.resolved] == ["old"]
    assert count.to_check == ()
    assert count.running == 0


def test_a_reused_listing_keeps_every_start_recorded_since_however_old() -> None:
    """With an old listing in use, a record past the window still holds its slot until a listing can show it.

    Read after the listing: it counts as it is. Read before it, but less than the window
    before: the listing may have missed it (lag), so it is checked. Only a listing read
    the whole window after the record settles it by age.
    """
    window = RECENT_START_WINDOW_SECONDS
    after = plan_count(listing(age=window + 10), {}, [record("after", window + 5)], 10, NOW)
    assert (after.running, after.resolved, after.to_check) == (1, (), ())
    lagged = plan_count(listing(age=20), {}, [record("lagged", window + 5)], 10, NOW)
    assert [r.name for r in lagged.to_check] == ["lagged"]
    assert lagged.resolved == ()
    settled = plan_count(listing(age=4), {}, [record("settled", window + 5)], 10, NOW)
    assert [r.name for r in settled.resolved] == ["settled"]
    assert review_from(NOW, NOW - 20) == NOW - 20 - window
    assert review_from(NOW, None) == review_from(NOW, NOW + 5) == NOW - window


def test_plan_count_judges_a_name_recorded_twice_by_its_newest_record() -> None:
    """A redelivered message recorded twice holds one slot, for as long as its newest record."""
    older, newer = record("twice", 80), record("twice", 10)
    count = plan_count(listing(), {}, [older, newer], 10, NOW)
    assert count.to_check == (newer,)
    assert count.resolved == (older,)


def test_plan_count_checks_oldest_first() -> None:
    """Unlisted records are checked oldest first, the ones closest to leaving the window."""
    count = plan_count(listing(), {}, [record("new", 1), record("old", 50), record("mid", 20)], 10, NOW)
    assert [r.name for r in count.to_check] == ["old", "mid", "new"]


def test_plan_count_leaves_out_a_listed_execution_an_event_says_ended() -> None:
    """The list lags after an end: an execution an event says ended holds no slot though listed."""
    count = plan_count(listing("done", "busy"), latest_ends([ended("done", 1)]), [], 10, NOW)
    assert count.running == 1


def test_plan_count_counts_an_ended_execution_the_list_shows_redriven_since() -> None:
    """An execution redriven after the stop an event reports is running again, and counts."""
    redriven_after = listing("again", again=1)
    redriven_before = listing("again", again=30)
    assert plan_count(redriven_after, latest_ends([ended("again", 10)]), [], 10, NOW).running == 1
    assert plan_count(redriven_before, latest_ends([ended("again", 10)]), [], 10, NOW).running == 0


def test_plan_count_resolves_a_record_whose_execution_an_event_says_ended() -> None:
    """A recorded start that an event says ended needs no DescribeExecution, and its record goes."""
    started = record("quick", 5)
    count = plan_count(listing(), latest_ends([ended("quick", 2)]), [started], 10, NOW)
    assert count.running == 0
    assert count.to_check == ()
    assert count.resolved == (started,)


def test_plan_count_keeps_a_record_written_after_the_reported_stop() -> None:
    """A record newer than the stop an event reports is not ended by it: it is checked."""
    later = record("again", 1)
    count = plan_count(listing(), latest_ends([ended("again", 5)]), [later], 10, NOW)
    assert count.to_check == (later,)


def test_plan_count_counts_records_newer_than_a_reused_listing_without_checking() -> None:
    """A start recorded after the listing was read can't be in it: it counts, no DescribeExecution."""
    count = plan_count(listing("a", age=0.8), {}, [record("new", 0.5), record("old", 5)], 10, NOW)
    assert count.running == 2
    assert [r.name for r in count.to_check] == ["old"]


def test_plan_count_at_max_reads_no_records() -> None:
    """A listing that reaches MAX is the count; the records need no review."""
    count = plan_count(listing("a", "b", complete=False), {}, [record("c", 5)], 2, NOW)
    assert count == RunningCount(2, executions=2)


def test_plan_count_partial_listing_short_of_max_is_taken_as_full() -> None:
    """A reused listing that stopped at MAX but now counts less says nothing of the rest: assume MAX."""
    partial = listing("a", "b", complete=False)
    count = plan_count(partial, latest_ends([ended("a", 1)]), [], 2, NOW)
    assert count.running == 2


def test_latest_ends_keeps_the_latest_stop_of_repeated_and_reordered_events() -> None:
    """Duplicated and out-of-order events for one name keep its latest stop."""
    ends = latest_ends([ended("x", 5), ended("y", 3), ended("x", 9), ended("x", 5)])
    assert ends == {"x": NOW - 5, "y": NOW - 3}


@pytest.mark.parametrize(
    ("redriven_ago", "stopped_ago", "running"),
    [(None, None, True), (None, 5, False), (10, 5, False), (2, 5, True), (5, 5, False)],
)
def test_listed_as_running_unless_ended_and_not_redriven_since(
    redriven_ago: float | None, stopped_ago: float | None, running: bool
) -> None:
    """Listed means running, unless an event reported a stop later than any redrive."""
    redriven_at = None if redriven_ago is None else NOW - redriven_ago
    stopped_at = None if stopped_ago is None else NOW - stopped_ago
    assert listed_as_running(redriven_at, stopped_at) is running


@pytest.mark.parametrize(
    ("status", "age", "counts"),
    [
        ("RUNNING", 10, True),
        ("PENDING_REDRIVE", 10, True),
        ("SUCCEEDED", 1, False),
        ("FAILED", 1, False),
        ("ABORTED", 1, False),
        ("TIMED_OUT", 1, False),
        (None, 10, True),
        (None, RECENT_START_WINDOW_SECONDS, True),
        (None, RECENT_START_WINDOW_SECONDS + 0.001, False),
    ],
)
def test_still_counts_until_step_functions_knows(status: str | None, age: float, counts: bool) -> None:
    """An unlisted start holds a slot while it runs, or for 90 s if it never started."""
    assert still_counts(status, record("x", age), NOW) is counts
