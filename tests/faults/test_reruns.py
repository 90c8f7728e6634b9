"""`dispatcher rerun` under faults: killed at any step or switched between modes, a failure re-runs once."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace

import pytest

from tests.faults.jobs import Job
from tests.faults.run import run_scenario
from tests.faults.scenario import Scenario
from tests.support.crashes import CrashPlan
from tests.support.faulty_aws import FaultyAws
from tests.support.plans import EventPlan, FaultPlan, Lag

pytestmark = pytest.mark.no_cover
"""Whole scenarios under faults check behaviour, not which lines run (tests/faults/test_properties.py)."""


def rerun_course(mode: str, crash: CrashPlan | None) -> Scenario:
    """New jobs keep arriving while failures are re-run, at MAX 2: the operator runs `rerun` every other tick.

    Every job calls the downstream API, down for the first two minutes, so the early
    ones fail; each `rerun` dies at ``crash`` (its held spool messages come back later).
    """
    jobs = [
        Job(
            f"job-{index}",
            f"g{index % 3}",
            json.dumps({"job": index, "seconds": 5 * (index % 3), "downstream": True}),
            arrives=index // 3,
            name=f"job-{index}" if index % 2 else None,
        )
        for index in range(9)
    ]
    ticks = 8
    faults = FaultPlan(lag=Lag(start=30.0, end=30.0, describe=10.0), throttle={"RedriveExecution": 0.3})
    return replace(
        Scenario.empty(2, faults, seed=zlib.crc32(f"{mode}{crash}".encode())),
        jobs=jobs,
        fault_ticks=ticks,
        intervals=[20.0] * ticks,
        events=EventPlan(enabled=True, duplicated=0.3, delay=2.0),
        outage_seconds=120.0,
        rerun_mode=mode,
        reruns=dict.fromkeys(range(2, ticks, 2), crash),
    )


# The steps where a kill leaves the most to put right: a job queued but its spool message
# kept, and the spool delete's answer lost. The soak kills `rerun` at all seven.
RERUN_KILLS = [
    ("redrive", ("sqs.SendMessageBatch", "after")),
    ("restart", ("sqs.SendMessageBatch", "after")),
    ("redrive", ("sqs.DeleteMessageBatch", "after")),
    ("restart", ("states.DescribeExecution", "after")),
]


@pytest.mark.parametrize(
    ("mode", "point"),
    RERUN_KILLS,
    ids=[f"{mode}-{when}-{operation}" for mode, (operation, when) in RERUN_KILLS],
)
def test_a_rerun_killed_at_each_step_loses_nothing_and_reruns_nothing_twice(
    mode: str, point: tuple[str, str], faulty_aws: FaultyAws
) -> None:
    """Killing `dispatcher rerun` anywhere: every failure is still re-run exactly once, within MAX.

    Re-runs are queued among new jobs; the cap is checked at every start and redrive.
    """
    scenario = rerun_course(mode, CrashPlan(*point))
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.failures > 0
    assert outcome.rerun_crashes >= 1, f"the crash point {point} was never reached"
    assert (outcome.redriven > 0) is (mode == "redrive")
    assert outcome.violations == [], scenario.describe()


def test_switching_modes_after_a_killed_rerun_reruns_nothing_both_ways(faulty_aws: FaultyAws) -> None:
    """Killed after queueing restart jobs, then run with --redrive: each failure is still re-run once.

    A queued restart leaves the failed execution as it was, so the redrive run always
    meets the claim and skips it; the operator does as the skip says, and every failure
    is re-run once, one way. (Without the claims: "redriven and restarted for one
    failure". The soak switches both ways; tests/cli switches from --redrive.)
    """
    crash = CrashPlan("sqs.SendMessageBatch", "after")
    scenario = replace(rerun_course("restart", crash), rerun_switch=True)
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.rerun_crashes >= 1
    assert outcome.rerun_switches >= 1, "ran the other way after the kill"
    assert outcome.rerun_refused >= 1, "a failure the killed run had queued was claimed"
    assert outcome.violations == [], scenario.describe()
