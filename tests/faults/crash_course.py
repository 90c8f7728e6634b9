"""The crash course: one scenario that reaches every step of a tick, with a crash at one of them.

The in-memory AWS runs it at each crash point (`tests/sim/test_crashes.py`); the
least-privilege test runs it on moto for the rare paths it reaches.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import replace

from tests.faults.jobs import Job
from tests.faults.scenario import Scenario
from tests.support.crashes import CrashPlan
from tests.support.plans import EventPlan, FaultPlan, Lag


def crash_course(plan: CrashPlan, *, redrives: bool | None = None) -> Scenario:
    """A backlog that reaches every step of a tick, and a crash at ``plan`` on two ticks of three.

    Short jobs and a 60 s list lag make recorded starts that end unlisted (Describe,
    then BatchWriteItem); poison and a name collision make dead letters; throttled
    starts make releases; jobs that end send status change events (PutItem), some of
    them twice, and seven in ten of the ticks they trigger crash at ``plan`` too. With
    ``redrives`` (by default, when ``plan`` is a redrive), half of the jobs call the
    downstream API during an outage, fail, and the operator has them redriven (queueing
    the redrive jobs before two of the ticks that crash).
    """
    if redrives is None:
        redrives = plan.operation == "states.RedriveExecution"
    jobs = [
        Job(f"bad-{index}", f"g{index}", "{not json", arrives=index, poison="invalid json")
        for index in range(3)
    ]
    for index in range(10):
        calls = redrives and index % 2
        body = json.dumps({"job": index, "seconds": index % 2, **({"downstream": True} if calls else {})})
        jobs.append(Job(f"ok-{index}", f"g{index % 5}", body, arrives=index // 3, name=f"job-{index}"))
    jobs.append(
        Job("clash", "g0", json.dumps({"other": 1}), arrives=3, name="job-0", poison="name collision")
    )
    faults = FaultPlan(lag=Lag(start=60.0), partial_delete=0.3, throttle={"StartExecution": 0.7})
    ticks = 12
    crashes = {tick: plan for tick in range(ticks) if tick % 3}
    return replace(
        Scenario.empty(2, faults, seed=zlib.crc32(str(plan).encode())),
        jobs=jobs,
        fault_ticks=ticks,
        intervals=[25.0] * ticks,
        crashes=crashes,
        events=EventPlan(enabled=True, duplicated=0.3, delay=2.0),
        event_crash_rate=0.7,
        event_crash=plan,
        outage_seconds=240.0 if redrives else 0.0,
        rerun_mode="redrive",
        reruns=dict.fromkeys([7, 10] if redrives else []),
    )
