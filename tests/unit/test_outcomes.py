"""The outcome table: each kind's keys, metrics and words, without AWS."""

from __future__ import annotations

from dispatcher.core.kinds import LABELS, keyed, member_metrics, metric_totals, said, total_keys, totals
from dispatcher.core.kinds.gate import GATE
from dispatcher.core.outcomes import Counts, Outcome
from dispatcher.core.topology import LANE

LANE_COUNTS = Counts({Outcome.STARTED: 3, Outcome.REDRIVEN: 1, Outcome.DEAD_LETTERED: 2, Outcome.WAITING: 4})
GATE_COUNTS = Counts({Outcome.STARTED: 5, Outcome.REFUSED: 1, Outcome.DEAD_LETTERED: 1, Outcome.WAITING: 2})


def test_outcome_done_is_what_leaves_the_queue() -> None:
    """Starts, ones made before, refused tokens, poison, cancelled and expired jobs leave; waits do not."""
    assert {outcome for outcome in Outcome if outcome.done} == {
        Outcome.STARTED,
        Outcome.ALREADY,
        Outcome.REFUSED,
        Outcome.DEAD_LETTERED,
        Outcome.CANCELLED,
        Outcome.EXPIRED,
    }


def test_keyed_gives_every_key_of_the_kind_in_the_tables_order() -> None:
    """A lane's counts are its eight keys; a gate says admitted where a lane says started."""
    assert keyed(LANE, LANE_COUNTS) == {
        "started": 3,
        "redriven": 1,
        "already_started": 0,
        "dead_lettered": 2,
        "cancelled": 0,
        "expired": 0,
        "released": 4,
        "delete_failures": 0,
    }
    assert list(keyed(GATE, GATE_COUNTS)) == [
        "admitted",
        "already_inside",
        "refused",
        "dead_lettered",
        "released",
        "delete_failures",
    ]


def test_totals_add_a_key_two_kinds_share_and_keep_each_kinds_own() -> None:
    """Dead letters and waits of lanes and gates add up; a gate's admissions stay apart from starts."""
    summed = totals((LANE, GATE), [(LANE, LANE_COUNTS), (GATE, GATE_COUNTS)])
    assert summed["started"] == 3
    assert summed["admitted"] == 5
    assert summed["dead_lettered"] == 3
    assert summed["released"] == 6
    assert total_keys((LANE,)) == list(keyed(LANE, Counts()))


def test_metrics_come_from_the_table_for_totals_and_for_each_member() -> None:
    """Totals sum by metric name over the kinds; a member's own metrics are its dimension's."""
    summed = metric_totals((LANE, GATE), [(LANE, LANE_COUNTS), (GATE, GATE_COUNTS)])
    assert summed["Started"] == 3
    assert summed["Admitted"] == 5
    assert summed["DeadLettered"] == 3
    assert summed["TokensRefused"] == 1
    assert "AlreadyInside" not in summed
    assert member_metrics(LANE, LANE_COUNTS) == {"Started": 3, "DeadLettered": 2, "Released": 4}
    assert member_metrics(GATE, GATE_COUNTS) == {"Admitted": 5, "TokensRefused": 1, "DeadLettered": 1}


def test_said_puts_parts_in_brackets_only_when_they_are_not_zero() -> None:
    """Redrives inside the starts, a gate's refusals inside its admissions; a zero part is left out."""
    report = {
        "started": 3,
        "redriven": 1,
        "admitted": 2,
        "already_inside": 0,
        "refused": 1,
        "already_started": 0,
        "dead_lettered": 4,
        "released": 5,
        "delete_failures": 1,
    }
    every = frozenset(Outcome) - {Outcome.DELETE_FAILED}
    assert said(report, (LANE, GATE), every) == (
        "started 3 (1 redriven), admitted 2 (1 refused), already started 0, dead-lettered 4, released 5"
    )
    assert said(report, (LANE,), frozenset({Outcome.STARTED, Outcome.DEAD_LETTERED})) == (
        "started 3, dead-lettered 4"
    )


def test_said_gives_cancelled_and_expired_jobs_only_when_there_are_some() -> None:
    """Most lanes never cancel or expire a job: a report says so only when one did."""
    report = {"started": 1, "dead_lettered": 0, "cancelled": 0, "expired": 2, "released": 0}
    assert said(report, (LANE,), frozenset({Outcome.STARTED, Outcome.CANCELLED, Outcome.EXPIRED})) == (
        "started 1, expired 2"
    )


def test_every_kind_says_each_outcome_it_has_once_and_names_each_metric_once() -> None:
    """No two outcomes of a kind share a key or a metric: a count is never reported twice."""
    for labels in LABELS.values():
        keys = [label.key for label in labels.values()]
        assert len(keys) == len(set(keys))
        named = [label.member for label in labels.values() if label.member is not None]
        assert len(named) == len(set(named))
