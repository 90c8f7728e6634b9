"""An adaptive pool under faults: cut by throttles that come twice and late, never above L, never cut twice.

The soak draws adaptive scenarios among the others (`tests.faults.adaptive`); this course
makes sure the three checks meet a pool that is cut, grows, and is reset: every job calls a
downstream API of capacity 2 behind a MAX of 6, its end events duplicated and late, some
`PutItem` answers lost (a limit written, its writer told it failed).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.faults.adaptive import AdaptivePlan
from tests.faults.jobs import Job
from tests.faults.run import run_scenario
from tests.faults.scenario import Scenario
from tests.support.faulty_aws import FaultyAws
from tests.support.plans import EventPlan, FaultPlan, Lag
from tests.support.runs import THROTTLE_ERROR

pytestmark = pytest.mark.no_cover
"""Whole scenarios under faults check behaviour, not which lines run (tests/faults/test_properties.py)."""


def throttled_course(*, in_parameter: bool) -> Scenario:
    """Twelve jobs of 10-30 s at MAX 6, each calling a downstream API that takes 2 at once."""
    jobs = [
        Job(
            f"job-{index}",
            f"g{index % 4}",
            json.dumps({"job": index, "seconds": 10 * (1 + index % 3), "downstream": True}),
            arrives=index // 4,
        )
        for index in range(12)
    ]
    ticks = 10
    faults = FaultPlan(lag=Lag(start=5.0, end=5.0, describe=5.0), lost_response={"PutItem": 0.3})
    plan = AdaptivePlan(
        errors=(THROTTLE_ERROR,),
        min=1,
        decrease=0.5,
        cooldown_seconds=5.0,
        capacity=2,
        in_parameter=in_parameter,
        switches={6: False, 8: True} if in_parameter else {},
    )
    return replace(
        Scenario.empty(6, faults, seed=47 + in_parameter),
        jobs=jobs,
        fault_ticks=ticks,
        intervals=[8.0] * ticks,
        events=EventPlan(enabled=True, duplicated=0.5, delay=3.0),
        reruns={5: None},
        adaptive=plan,
    )


def test_throttles_cut_the_limit_once_each_and_nothing_starts_above_it(faulty_aws: FaultyAws) -> None:
    """The pool is cut by throttles (never twice by one), stays within [1, 6], starts nothing above L.

    Its settings are the control parameter's, turned off and on by the operator; the soak
    draws settings in ``LANES`` too (a course of each cost the suite 4 s more).
    """
    scenario = throttled_course(in_parameter=True)
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()
    assert outcome.adaptive["runs throttled by the downstream's capacity"] > 0
    assert outcome.adaptive["cuts (each by its own signal)"] > 0
    assert outcome.adaptive["limit written by a tick"] > outcome.adaptive["cuts (each by its own signal)"]
    assert outcome.adaptive["scenarios reset by the operator (reset-limit)"] == 1
    assert outcome.injected["adaptive turned off by the operator"] == 1
