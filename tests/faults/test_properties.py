"""The invariants of DESIGN.md, checked on generated scenarios under injected faults.

Each scenario (see `Scenario.generate`) draws a backlog, a MAX, AWS's documented lag
and a fault schedule from its seed, runs the real handler tick by tick against the
faulty emulator, then runs quiet until the queue drains, and checks cap, no loss, no
duplicates, order and liveness against the emulator's ground truth. This is the fast
profile; `make soak` runs thousands more (tests/faults/soak.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from dispatcher.core.batching import SQS_BATCH_LIMIT
from tests.faults.jobs import Job
from tests.faults.run import ScenarioRun, run_scenario
from tests.faults.scenario import Scenario
from tests.support.crashes import CrashPlan
from tests.support.exchanges import Request
from tests.support.faulty_aws import FaultyAws
from tests.support.plans import EventPlan, FaultPlan, Lag

CHOSEN_SEEDS = (0, 1, 8, 9, 11, 12, 16, 19, 29, 32, 37, 39, 40, 41)
"""The fast profile's generated scenarios, chosen by measurement (`python -m tests.faults.profile`):
of seeds 0-47, these draw 6,457 of the 6,539 branches, faults, calls and figures all 48 draw,
in 33.8 s of CPU; seeds 0-15 drew 6,362 in 42.6 s. The soak is the place for breadth."""
FAST_PROFILE_SEEDS = (
    tuple(range(int(os.environ["FAULT_SCENARIOS"]))) if "FAULT_SCENARIOS" in os.environ else CHOSEN_SEEDS
)

pytestmark = pytest.mark.no_cover
"""Whole scenarios under faults check behaviour, not which lines run: the tests of each part
(tests/unit, tests/integration, the faults' focused tests) measure those, and tracing
these added about 20 s to the suite's pytest time (CONTRIBUTING, "The suite's time")."""


@pytest.mark.parametrize("seed", FAST_PROFILE_SEEDS)
def test_generated_scenario_keeps_every_invariant(seed: int, faulty_aws: FaultyAws) -> None:
    """Cap, no loss, no duplicates, order and liveness hold under a generated fault schedule."""
    scenario = Scenario.generate(seed)
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()


def _laned(  # noqa: PLR0913 — each is one property of the lane looked for
    *,
    rated: bool,
    paused: bool,
    poison: bool,
    kind: str = "shared",
    capped: bool | None = None,
    changed: bool | None = None,
) -> Scenario:
    """The first generated scenario with a second lane of this kind (generation is deterministic).

    ``capped``: with a MAX of its own; ``changed``: its pool's MAX changed live (None: either).
    """
    for seed in range(2000, 6000):
        scenario = Scenario.generate(seed)
        lane = scenario.lane
        if (
            lane is not None
            and lane.kind == kind
            and (lane.starts_per_second is not None) == rated
            and bool(lane.pauses) == paused
            and capped in {None, lane.max_concurrency is not None}
            and changed in {None, bool(lane.pool_changes)}
            and any(job.lane is not None and (job.poison is not None) == poison for job in scenario.jobs)
        ):
            return scenario
    raise AssertionError("no such scenario among the seeds tried")


def _gated(kind: str) -> Scenario:
    """The first generated scenario with a gate of this kind, answers of its calls lost, a crash."""
    for seed in range(2000, 6000):
        scenario = Scenario.generate(seed)
        gate = scenario.gate
        if gate is not None and gate.kind == kind and gate.crashes and "lost_response" in gate.faults:
            return scenario
    raise AssertionError("no such scenario among the seeds tried")


@pytest.mark.parametrize("kind", ["shared", "pool"])
def test_a_gate_keeps_its_caps_loses_no_request_and_admits_none_twice(
    kind: str, faulty_aws: FaultyAws
) -> None:
    """Gated executions under lost, doubled, early and late requests and releases, deaths and crashes."""
    scenario = _gated(kind)
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()
    assert outcome.admissions > 0


@pytest.mark.parametrize(
    ("rated", "paused", "poison"), [(True, True, False), (False, False, True), (True, False, True)]
)
def test_a_second_lane_on_the_same_machine_keeps_every_invariant_per_lane_and_for_the_pool(
    rated: bool, paused: bool, poison: bool, faulty_aws: FaultyAws
) -> None:
    """Two queues into one state machine: cap of the pool, no loss, no duplicates, order, own DLQ."""
    scenario = _laned(rated=rated, paused=paused, poison=poison)
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()
    assert outcome.executions > 0


@pytest.mark.parametrize(
    "shape",
    [
        {"kind": "own", "rated": False, "paused": True, "capped": True},
        {"kind": "own", "rated": True, "paused": False, "capped": False},
        {"kind": "pool", "rated": True, "paused": False, "changed": True},
        {"kind": "pool", "rated": False, "paused": True, "capped": True, "changed": False},
    ],
    ids=["own-capped-paused", "own-rated", "pool-rated-changed", "pool-capped-paused"],
)
def test_a_second_lane_with_its_own_state_machine_keeps_every_invariant_per_lane_and_pool(
    shape: dict[str, Any], faulty_aws: FaultyAws
) -> None:
    """Its own state machine, in pool default or its own pool: each pool's cap, the lane's MAX, its rate.

    The rate is checked at its `StartExecution` calls, a pool's MAX changed live by the
    operator is checked from the first cold start after; no loss, no duplicates, order, own DLQ.
    """
    scenario = _laned(poison=False, **shape)
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()
    assert outcome.executions > 0


def test_failures_of_two_lanes_on_one_machine_rerun_on_their_own_lanes_and_a_stale_key_stops_nothing(
    faulty_aws: FaultyAws,
) -> None:
    """Both lanes' jobs fail in an outage: each re-run goes back to its own lane's queue.

    As recorded at its start; a key the operator left for a removed lane is ignored, and
    `forget` removes it.
    """
    scenario = next(
        scenario
        for scenario in map(Scenario.generate, range(2000, 6000))
        if scenario.lane is not None
        and scenario.lane.kind == "shared"
        and scenario.outage_seconds >= 300
        and scenario.stale
        and any(job.lane is not None and '"downstream": true' in job.body for job in scenario.jobs)
    )
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()
    assert outcome.rerun_jobs > 0
    assert outcome.injected["stale control key (a member removed from LANES)"] == 1


def test_the_operator_pauses_a_lane_right_after_a_tick_died(faulty_aws: FaultyAws) -> None:
    """Seed 408: a tick dies, then the operator pauses the lane; the operator's own calls go on.

    The soak's first run of lanes stopped here: the operator's client was made after the
    dispatcher's process hooked the default session, so it died with the process.
    """
    scenario = Scenario.generate(408)
    assert scenario.lane is not None
    assert scenario.lane.pauses
    assert scenario.crashes
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()


@pytest.mark.parametrize("seed", range(1000, 1004))
def test_quiet_scenario_drains_with_lag_alone(seed: int, faulty_aws: FaultyAws) -> None:
    """With no injected fault, only AWS's own lag, every invariant holds and nothing crashes."""
    scenario = Scenario.generate(seed, faults=False)
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()
    assert outcome.crashes == 0


def test_cap_holds_when_list_reads_disagree(faulty_aws: FaultyAws) -> None:
    """A list that shows an execution, then omits it again within the lag, lets no start over MAX through."""
    jobs = [
        Job(f"long-{index}", f"g{index}", json.dumps({"job": index, "seconds": 120}), 0) for index in range(9)
    ]
    ticks = 30
    scenario = replace(
        Scenario.empty(3, FaultPlan(lag=Lag(start=60.0, flaky=True)), seed=60),
        jobs=jobs,
        fault_ticks=ticks,
        intervals=[2.0] * ticks,
    )
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.violations == [], scenario.describe()


def _first_wave_together(size: int) -> Callable[[Request], None]:
    """Hold the dispatcher's first ``size`` starts until all of them have been sent (at most 30 s).

    So none of them can come back, throttled, before the last one begins: a first wave of
    ``size`` is seen whole, however fast the answers come (a condition, not a race).
    """
    together = threading.Barrier(size, timeout=30)
    lock = threading.Lock()
    held = [0]

    def hold(request: Request) -> None:
        if not request.from_dispatcher or request.operation != "StartExecution":
            return
        with lock:
            if held[0] >= size:
                return
            held[0] += 1
        with contextlib.suppress(threading.BrokenBarrierError):
            together.wait()

    return hold


def test_every_start_throttled_a_wide_round_sends_one_receive_batch_and_loses_nothing(
    faulty_aws: FaultyAws,
) -> None:
    """30 jobs, 30 groups, MAX 30, 32 threads, every start throttled: 10 tried a round, then all start."""
    jobs = [
        Job(f"wide-{index}", f"g{index}", json.dumps({"job": index, "seconds": 10}), 0) for index in range(30)
    ]
    scenario = replace(
        Scenario.empty(30, FaultPlan(throttle={"StartExecution": 1.0}), seed=26),
        jobs=jobs,
        fault_ticks=3,
        intervals=[5.0] * 3,
        start_concurrency=32,
    )
    faulty_aws.before = _first_wave_together(SQS_BATCH_LIMIT)
    try:
        outcome = run_scenario(scenario, faulty_aws)
    finally:
        faulty_aws.before = None
    assert outcome.violations == [], scenario.describe()
    assert outcome.injected["throttle StartExecution"] > 0
    assert outcome.largest_blind_wave == 10, "the check saw a full first wave"
    assert outcome.executions == 30


def test_a_crash_with_part_of_a_round_started_loses_and_duplicates_nothing(faulty_aws: FaultyAws) -> None:
    """Killed after the third start of a round of eight groups: the rest start later, once, in order."""
    jobs = [
        Job(
            f"job-{index}", f"g{index % 8}", json.dumps({"job": index, "seconds": 30}), 0, name=f"job-{index}"
        )
        for index in range(24)
    ]
    plan = CrashPlan("states.StartExecution", "after", nth=3)
    scenario = replace(
        Scenario.empty(8, FaultPlan(lag=Lag(start=30.0, end=30.0)), seed=8),
        jobs=jobs,
        fault_ticks=4,
        intervals=[40.0] * 4,
        crashes={0: plan},
        start_concurrency=4,
        events=EventPlan(enabled=True, delay=1.0),
    )
    run = ScenarioRun(scenario, faulty_aws)
    began = run.world.now
    outcome = run.run()
    started_before_the_crash = [e for e in run.world.executions.values() if e.started_at == began]
    assert outcome.crashes == 1
    assert 3 <= len(started_before_the_crash) < 8
    assert outcome.violations == [], scenario.describe()


def test_events_lost_duplicated_and_late_never_exceed_max(faulty_aws: FaultyAws) -> None:
    """Short jobs whose end events are lost, doubled and delayed past the list lag keep cap and order."""
    jobs = [
        Job(f"short-{index}", f"g{index % 3}", json.dumps({"job": index, "seconds": 2}), index // 6)
        for index in range(30)
    ]
    ticks = 8
    scenario = replace(
        Scenario.empty(3, FaultPlan(lag=Lag(start=30.0, end=60.0, describe=10.0)), seed=31),
        jobs=jobs,
        fault_ticks=ticks,
        intervals=[30.0] * ticks,
        events=EventPlan(enabled=True, lost=0.3, duplicated=0.5, delay=90.0),
        warm=0.7,
    )
    outcome = run_scenario(scenario, faulty_aws)
    assert outcome.event_ticks > 10
    assert outcome.violations == [], scenario.describe()


def test_end_event_batches_lost_doubled_late_and_malformed_keep_every_guarantee(
    faulty_aws: FaultyAws,
) -> None:
    """Ends in SQS batches: whole batches lost, delivered twice, late past the lag, with records to skip."""
    jobs = [
        Job(f"short-{index}", f"g{index % 4}", json.dumps({"job": index, "seconds": 2}), index // 8)
        for index in range(40)
    ]
    ticks = 8
    scenario = replace(
        Scenario.empty(4, FaultPlan(lag=Lag(start=30.0, end=60.0, describe=10.0)), seed=16),
        jobs=jobs,
        fault_ticks=ticks,
        intervals=[30.0] * ticks,
        events=EventPlan(
            enabled=True,
            duplicated=0.3,
            delay=90.0,
            batch_size=3,
            batch_lost=0.2,
            batch_doubled=0.5,
            malformed=0.6,
        ),
        warm=0.5,
    )
    run = ScenarioRun(scenario, faulty_aws)
    outcome = run.run()
    injected = run.world.injected
    assert injected["end event batch lost"] > 0
    assert injected["end event batch delivered twice"] > 0
    assert injected["end event batch with a record that is not an end"] > 0
    assert outcome.event_ticks > 5
    assert outcome.violations == [], scenario.describe()


def test_refill_on_completion_drains_faster_than_the_schedule(faulty_aws: FaultyAws) -> None:
    """With end events a freed slot is refilled by the event's tick, before the next scheduled one."""
    jobs = [Job(f"j{index}", f"g{index}", json.dumps({"job": index, "seconds": 5}), 0) for index in range(6)]

    def run(events: EventPlan) -> int:
        scenario = replace(
            Scenario.empty(2, FaultPlan(lag=Lag(end=60.0)), seed=5),
            jobs=[replace(job) for job in jobs],
            fault_ticks=2,
            intervals=[60.0, 0.0],
            events=events,
        )
        outcome = run_scenario(scenario, faulty_aws)
        assert outcome.violations == [], scenario.describe()
        return outcome.executions_in_fault_phase

    schedule_only = run(EventPlan(enabled=False))
    refilled = run(EventPlan(enabled=True, delay=0.5))
    batched = run(EventPlan(enabled=True, delay=0.5, batch_size=3))
    assert schedule_only <= 4
    assert refilled == 6
    assert batched == 6, "the ends in a batch free their slots as single events do"
