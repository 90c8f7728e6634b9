"""The tick's own buckets below AWS's, the start threads' size, and the window a lease keeper keeps."""

from __future__ import annotations

import pytest

from dispatcher.core import quotas
from dispatcher.core.counting import REREAD_SECONDS, KnownWindow, LedgerStart, StateWindow, review_from
from dispatcher.core.events import EndedExecution
from dispatcher.core.pacing import (
    START_THREADS_HIGHEST,
    START_THREADS_LOWEST,
    Latency,
    Pace,
    Paces,
    quota_scope,
    region_of,
    start_threads,
)
from dispatcher.tick.warm import SEEN_RUNNING_LIMIT, WarmState


def test_a_pace_grants_its_burst_at_once_then_its_rate() -> None:
    """A pace grants its burst at once, then its rate."""
    pace = Pace(rate=2.0, burst=5.0)
    assert pace.take(100.0, 8) == 5
    assert pace.take(100.0, 1) == 0
    assert pace.take(101.0, 8) == 2  # a second at 2/s
    assert pace.take(200.0, 100) == 5  # never more than the burst, however long it rested


def test_a_reservation_owes_tokens_and_says_how_long_to_wait() -> None:
    """A reservation owes tokens and says how long to wait."""
    pace = Pace(rate=10.0, burst=20.0)
    assert pace.reserve(0.0, 15) == 0.0
    assert pace.reserve(0.0, 15) == pytest.approx(1.0)  # 10 owed at 10/s
    assert pace.reserve(1.0, 5) == pytest.approx(0.5)  # the second paid the debt; 5 more owed
    assert not pace.ready(1.0, 1)


def test_ready_takes_nothing_and_never_asks_for_more_than_the_bucket() -> None:
    """Ready takes nothing and never asks for more than the bucket."""
    pace = Pace(rate=0.6, burst=3.0)
    assert pace.ready(0.0, 3)
    assert pace.ready(0.0, 3)  # nothing taken
    assert pace.ready(0.0, 10)  # a listing of 10 pages waits for a full bucket, not forever
    pace.reserve(0.0, 3)
    assert not pace.ready(4.0, 3)
    assert pace.ready(5.0, 3)


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1"])
def test_the_paces_stay_below_step_functions_buckets(region: str) -> None:
    """Each pace refills slower than AWS's bucket and bursts less than it holds."""
    paces, buckets = Paces.of_region(region), quotas.step_functions(region)
    for pace, operation in (
        (paces.start, "StartExecution"),
        (paces.describe, "DescribeExecution"),
        (paces.list, "ListExecutions"),
    ):
        assert pace.rate < buckets[operation].refill
        assert pace.burst < buckets[operation].size
    # at 90 % of StartExecution's refill, the Describe pace is at most 0.02 calls a start
    assert paces.describe.rate <= 0.02 * 0.9 * buckets["StartExecution"].refill
    assert paces.list.rate <= 2.0


def test_start_threads_follow_the_quota_and_the_latency_within_bounds() -> None:
    """Start threads follow the quota and the latency, within bounds."""
    assert start_threads(285.0, 0.02) == 18  # 285 a second, 20 ms, 3 phases: 17.1
    assert start_threads(285.0, 0.05) == START_THREADS_HIGHEST
    assert start_threads(142.5, 0.001) == START_THREADS_LOWEST
    assert start_threads(142.5, 0.05) > start_threads(142.5, 0.02)


def test_the_latency_moves_toward_what_is_measured() -> None:
    """The latency moves toward what is measured."""
    latency = Latency()
    for _ in range(100):
        latency.observe(0.02)
    assert latency.seconds == pytest.approx(0.02, abs=1e-4)
    latency.observe(-1.0)  # a clock that stepped back is read as no time
    assert latency.seconds < 0.02


def test_region_of_an_arn() -> None:
    """The region is read from an ARN."""
    assert region_of("arn:aws:states:eu-central-1:123456789012:stateMachine:jobs") == "eu-central-1"


def test_quotas_are_scoped_by_account_and_region_not_by_state_machine() -> None:
    """Quotas are scoped by account and region not by state machine."""
    assert quota_scope("arn:aws:states:eu-central-1:123456789012:stateMachine:jobs") == (
        "123456789012:eu-central-1"
    )


def test_two_state_machines_of_one_account_and_region_spend_one_set_of_paces() -> None:
    """StartExecution's quota is per account and region: two machines must not each pace to all of it."""
    warm = WarmState()
    urgent = warm.paces_for("arn:aws:states:us-east-1:123456789012:stateMachine:urgent")
    backfill = warm.paces_for("arn:aws:states:us-east-1:123456789012:stateMachine:backfill")
    assert urgent is backfill
    burst = int(urgent.start.burst)
    assert urgent.start.take(1000.0, burst) == burst
    assert backfill.start.take(1000.0, 1) == 0  # the other machine's starts spent the bucket
    elsewhere = warm.paces_for("arn:aws:states:eu-west-1:123456789012:stateMachine:urgent")
    other_account = warm.paces_for("arn:aws:states:us-east-1:210987654321:stateMachine:urgent")
    assert elsewhere is not urgent
    assert other_account is not urgent
    assert elsewhere.start.take(1000.0, 1) == other_account.start.take(1000.0, 1) == 1


def record(name: str, at: float) -> LedgerStart:
    """A start record at ``at``."""
    return LedgerStart(name=name, recorded_at=at, sort_key=f"{at:017.6f}#{name}")


def test_a_known_window_adds_reads_drops_settled_and_forgets_the_old() -> None:
    """A known window adds reads, drops what settled and forgets the old."""
    known = KnownWindow(read_at=1000.0)
    known.add(StateWindow(starts=(record("a", 950.0), record("b", 999.0))), 1000.0)
    assert known.rereads_from() == 1000.0 - REREAD_SECONDS
    ended = EndedExecution(name="a", stopped_at=990.0)
    # the next read overlaps the last: what it reads again is not counted twice
    known.add(StateWindow(starts=(record("b", 999.0), record("c", 1001.0)), ended=(ended, ended)), 1002.0)
    view = known.views({"": review_from(1002.0, None)})[""]
    assert sorted(start.name for start in view.starts) == ["a", "b", "c"]
    assert view.ended == (ended,)
    known.drop([record("b", 999.0)])
    assert sorted(start.name for start in known.views({"": review_from(1002.0, None)})[""].starts) == [
        "a",
        "c",
    ]
    later = known.views({"": review_from(1045.0, None)})[""]  # "a" was recorded more than 90 s before
    assert [start.name for start in later.starts] == ["c"]
    assert later.ended == (ended,)  # the end was read at 1002: it stays for 90 s from then
    assert known.views({"": review_from(1093.0, None)})[""].ended == ()


def test_a_known_window_gives_each_state_machine_its_own_records_from_its_own_oldest() -> None:
    """One read of every machine's records: each view holds its machine's, from its own review start."""
    glue = "arn:glue"
    known = KnownWindow(read_at=1000.0)
    ours = record("a", 950.0)
    theirs = ours.model_copy(update={"state_machine_arn": glue, "sort_key": f"{ours.sort_key}#glue"})
    ended = EndedExecution(name="b", stopped_at=990.0, state_machine_arn=glue)
    known.add(StateWindow(starts=(ours, theirs, record("c", 999.0)), ended=(ended,)), 1000.0)
    views = known.views({"": 940.0, glue: 960.0})
    assert views[""].starts == (ours, record("c", 999.0))
    assert views[""].ended == ()
    assert views[glue].starts == (), "its listing is newer: the record before it is left out"
    assert views[glue].ended == (ended,)
    assert known.views({glue: 960.0})[glue].ended == (ended,)
    assert known.views({"": 940.0})[""].starts == (record("c", 999.0),), "older than every oldest: forgotten"


def test_a_known_window_leaves_out_a_start_a_later_read_voids() -> None:
    """A void read after its start (another writer's, or a round's never-started) drops it."""
    known = KnownWindow(read_at=1000.0)
    known.add(StateWindow(starts=(record("a", 999.0), record("b", 999.5))), 1000.0)
    known.add(StateWindow(void=frozenset({record("a", 999.0).sort_key, "unknown"})), 1001.0)
    assert [start.name for start in known.views({"": review_from(1001.0, None)})[""].starts] == ["b"]


def test_a_warm_container_remembers_what_it_saw_running_for_the_review_window() -> None:
    """Seen running at a moment: known from then on; the old dropped past the limit; a cold start forgets."""
    warm = WarmState()
    warm.saw_running("a", 100.0)
    assert warm.running_since("a", 100.0)
    assert not warm.running_since("a", 100.5), "a listing read after the check can tell more"
    assert not warm.running_since("b", 0.0)
    for index in range(SEEN_RUNNING_LIMIT):
        warm.saw_running(f"job-{index}", 200.0)
    assert not warm.running_since("a", 0.0), "seen more than the review window ago: dropped"
    assert len(warm.seen_running) == SEEN_RUNNING_LIMIT
    warm.forget()
    assert warm.seen_running == {}
