"""Generated scenarios: a backlog, a MAX, a fault schedule, drawn from one seed.

`Scenario.generate(seed)` draws everything from one seed, so any failure is replayed
with the same seed (with more than one start thread, the same faults may hit other
messages: concurrent requests reach the emulator in any order). `tests.faults.run` runs
one; `tests.faults.checks` checks its end; `tests.faults.tally` adds the outcomes up.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field

from tests.faults.adaptive import AdaptivePlan, plan_adaptive
from tests.faults.following import FollowPlan, plan_follow
from tests.faults.gate_plans import GatePlan, plan_gate
from tests.faults.jobs import MAX_DURATION_SECONDS, Job, backlog
from tests.faults.lanes import LanePlan, plan_lane
from tests.faults.operator import RERUN_CRASH_POINTS
from tests.faults.sizes import SizePlan, plan_sizes
from tests.faults.tenants import TenantPlan, plan_tenants
from tests.faults.waking import WakePlan, plan_wakes
from tests.support.crashes import CRASH_POINTS, CrashPlan
from tests.support.plans import EventPlan, FaultPlan, Lag

ADVICE = re.compile(r"finish with `dispatcher rerun --(\w+)`")
"""How a skipped failure says which mode an earlier run queued it for."""

FAULTY_OPERATIONS = (
    "DescribeStateMachine",
    "ListExecutions",
    "DescribeExecution",
    "StartExecution",
    "Query",
    "PutItem",
    "BatchWriteItem",
    "ReceiveMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibilityBatch",
    "SendMessage",
    "GetParameter",
    "UpdateItem",
    "DeleteItem",
)
PROCESSED_THEN_FAILED = (
    "StartExecution",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "ReceiveMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibilityBatch",
    "SendMessage",
)
CONTROL_OVERRIDE = 3
"""How much higher MAX_CONCURRENCY is than the control parameter's MAX in a controlled scenario."""
MAX_LAG_SECONDS = 60.0


@dataclass
class Scenario:
    """Everything one run needs, drawn from ``seed``."""

    seed: int
    max_concurrency: int
    jobs: list[Job]
    faults: FaultPlan
    fault_ticks: int
    intervals: list[float]
    crashes: dict[int, CrashPlan]
    deadlines: dict[int, int]
    external: dict[int, float]
    """Tick → duration of an execution started by someone else before that tick."""
    events: EventPlan = field(default_factory=EventPlan)
    warm: float = 0.0
    """Chance a tick runs in the container of the previous one (clients and warm reads kept)."""
    start_concurrency: int = 10
    event_crash_rate: float = 0.0
    """Chance an event-triggered tick (fault phase) dies."""
    event_crash: CrashPlan | None = None
    """Where such a tick dies; None: a step drawn at random each time."""
    misdirected: dict[int, str] = field(default_factory=dict)
    """Tick → a misdirected event delivered before it: "other machine" or "running status"."""
    redrives: dict[int, float] = field(default_factory=dict)
    """Tick → seconds after its foreign execution ends that someone else redrives it."""
    controlled: bool = False
    """MAX comes from the control parameter; the environment's MAX_CONCURRENCY is higher."""
    outage_seconds: float = 0.0
    """The downstream API is down this long from the start: jobs that call it fail meanwhile."""
    rerun_mode: str = "restart"
    reruns: dict[int, CrashPlan | None] = field(default_factory=dict)
    """Tick → the operator runs `dispatcher rerun` before it (and dies there, if a plan is given)."""
    rerun_switch: bool = False
    """After the first killed `rerun`, the operator switches to the other mode."""
    wide: bool = False
    """A wide round: MAX above one receive batch and about one job a group (`_widen`)."""
    lane: LanePlan | None = None
    """A second lane (`tests.faults.lanes`)."""
    gate: GatePlan | None = None
    """A gate in pool default or a pool of its own (`tests.faults.gates`), beside a second lane or not."""
    tenants: TenantPlan | None = None
    """Who counts by message group, and how (`tests.faults.tenants`)."""
    stale: dict[int, str] = field(default_factory=dict)
    """Tick → the kind (``pools``, ``lanes``, ``gates``) of a stale key the operator leaves in the
    control parameter before it: a member paused, then removed from ``LANES`` (`tests.faults.operator`)."""
    follow: FollowPlan | None = None
    """The producer's cancellations and deadlines (`tests.faults.following`)."""
    adaptive: AdaptivePlan | None = None
    """Pool default's adaptive settings and the downstream's capacity (`tests.faults.adaptive`)."""
    wakes: WakePlan | None = None
    """The producer's wakes and how they fare (`tests.faults.waking`); None: it sends none."""
    sizes: SizePlan | None = None
    """Jobs of several slots, and jobs too large for any MAX (`tests.faults.sizes`)."""

    @classmethod
    def generate(cls, seed: int, *, faults: bool = True) -> Scenario:
        """Draw a scenario; ``faults=False`` keeps only what AWS does anyway (lag, events as they come)."""
        rng = random.Random(seed)
        max_concurrency = rng.choice([1, 1, 2, 3, 4, 5, 8])
        groups = [f"g{index}" for index in range(rng.randint(1, 5))]
        arrival_ticks = rng.randint(1, 6)
        jobs = backlog(rng, rng.randint(1, 24), groups, arrival_ticks)
        plan = FaultPlan(
            lag=Lag(
                start=rng.choice([0.0, 5.0, 30.0, MAX_LAG_SECONDS]),
                end=rng.choice([0.0, 30.0, MAX_LAG_SECONDS]),
                describe=rng.choice([0.0, 10.0, MAX_LAG_SECONDS]),
                flaky=rng.random() < 0.4,
            )
        )
        crash_rate = 0.0
        deadline_rate = 0.0
        if faults:
            plan.throttle = _rates(rng, FAULTY_OPERATIONS, share=0.3)
            plan.server_error = _rates(rng, FAULTY_OPERATIONS, share=0.2)
            plan.lost_response = _rates(rng, PROCESSED_THEN_FAILED, share=0.3)
            plan.partial_delete = rng.choice([0.0, 0.0, 0.2, 0.5])
            crash_rate = rng.choice([0.0, 0.2, 0.4])
            deadline_rate = rng.choice([0.0, 0.1])
        fault_ticks = arrival_ticks + rng.randint(2, 10)
        crashes = {
            tick: CrashPlan(*rng.choice(CRASH_POINTS), nth=rng.randint(1, 3))
            for tick in range(fault_ticks)
            if rng.random() < crash_rate
        }
        deadlines = {tick: rng.randint(0, 3) for tick in range(fault_ticks) if rng.random() < deadline_rate}
        external = {
            rng.randrange(fault_ticks): rng.choice([5.0, 60.0, MAX_DURATION_SECONDS])
            for _ in range(rng.choice([0, 0, 1, 2]))
        }
        intervals = [rng.choice([0.0, 1.0, 5.0, 20.0, 45.0, 70.0]) for _ in range(fault_ticks)]
        events = EventPlan(
            enabled=rng.random() < 0.85,
            lost=rng.choice([0.0, 0.0, 0.2, 0.5]) if faults else 0.0,
            duplicated=rng.choice([0.0, 0.2, 0.5]),
            delay=rng.choice([0.5, 2.0, 10.0, 90.0]),
        )
        _batch_deliveries(events, random.Random(f"{seed}:batching"), faults=faults)
        wide = _widen(random.Random(f"{seed}:wide"), plan, faults=faults)
        if wide is not None:
            max_concurrency, jobs = wide.max_concurrency, wide.jobs
        misdirected = {
            tick: rng.choice(["other machine", "running status"])
            for tick in range(fault_ticks)
            if faults and rng.random() < 0.1
        }
        redrives = {tick: rng.choice([1.0, 20.0]) for tick in external if rng.random() < 0.5}
        lane = plan_lane(
            random.Random(f"{seed}:lane"),
            jobs,
            fault_ticks,
            wide=wide is not None,
            crossing=random.Random(f"{seed}:crossing"),
        )
        gate = None
        if wide is None:
            gate = plan_gate(random.Random(f"{seed}:gate"), fault_ticks, faults=faults)
            if gate is not None:
                gate.add_faults(plan)
        tenants = plan_tenants(
            random.Random(f"{seed}:tenants"), jobs, lane=lane is not None, gate=gate is not None
        )
        reruns = {
            tick: (
                CrashPlan(*rng.choice(RERUN_CRASH_POINTS), nth=rng.randint(1, 2))
                if faults and rng.random() < 0.4
                else None
            )
            for tick in range(1, fault_ticks)
            if rng.random() < 0.25
        }
        scenario = cls(
            seed,
            max_concurrency,
            jobs,
            plan,
            fault_ticks,
            intervals,
            crashes,
            deadlines,
            external,
            events=events,
            warm=rng.choice([0.0, 0.5, 0.9]),
            start_concurrency=_threads(rng.choice([1, 2, 10]), wide),
            event_crash_rate=crash_rate / 2,
            misdirected=misdirected,
            redrives=redrives,
            controlled=rng.random() < 0.5,
            outage_seconds=rng.choice([0.0, 60.0, 300.0, 3600.0]),
            rerun_mode=rng.choice(["restart", "redrive"]),
            reruns=reruns,
            rerun_switch=rng.random() < 0.5,
            wide=wide is not None,
            lane=lane,
            gate=gate,
            tenants=tenants,
            stale=_stale(random.Random(f"{seed}:stale"), fault_ticks),
            follow=plan_follow(random.Random(f"{seed}:follow"), jobs, fault_ticks) if faults else None,
            adaptive=plan_adaptive(
                random.Random(f"{seed}:adaptive"), jobs, max_concurrency, fault_ticks, wide=wide is not None
            ),
            wakes=plan_wakes(random.Random(f"{seed}:wakes"), faults=faults),
        )
        scenario.sizes = plan_sizes(
            random.Random(f"{seed}:sizes"),
            jobs,
            _size_limit(max_concurrency, tenants),
            max_concurrency * CONTROL_OVERRIDE + 1,
            second_lane=lane is not None,
        )
        return scenario

    @classmethod
    def empty(cls, max_concurrency: int, faults: FaultPlan | None = None, seed: int = 0) -> Scenario:
        """No backlog and no schedule: a test sends and ticks by hand."""
        return cls(seed, max_concurrency, [], faults or FaultPlan(), 0, [], {}, {}, {})

    def describe(self) -> str:
        """One line to recognise the scenario in a failure report."""
        kinds = Counter(job.poison or ("duplicate" if job.duplicate_of else "valid") for job in self.jobs)
        return (
            f"seed={self.seed} MAX={self.max_concurrency} jobs={dict(kinds)} ticks={self.fault_ticks} "
            f"lag={self.faults.lag} crashes={[str(plan) for plan in self.crashes.values()]} "
            f"throttle={self.faults.throttle} 5xx={self.faults.server_error} "
            f"lost={self.faults.lost_response} partial_delete={self.faults.partial_delete} "
            f"events={self.events} warm={self.warm} threads={self.start_concurrency} "
            f"misdirected={self.misdirected} redrives={self.redrives} controlled={self.controlled} "
            f"outage={self.outage_seconds} rerun={self.rerun_mode} reruns={_plans(self.reruns)}"
            f" switch={self.rerun_switch} wide={self.wide}"
            + ("" if self.lane is None else f" {self.lane.describe()}")
            + ("" if self.gate is None else f" {self.gate.describe()}")
            + ("" if self.tenants is None else f" {self.tenants.describe()}")
            + ("" if not self.stale else f" stale={self.stale}")
            + ("" if self.follow is None else f" {self.follow.describe()}")
            + ("" if self.adaptive is None else f" {self.adaptive.describe()}")
            + ("" if self.wakes is None else f" {self.wakes.describe()}")
            + ("" if self.sizes is None else f" {self.sizes.describe()}")
        )


STALE_SHARE = 0.15
"""Scenarios whose operator leaves a stale key in the control parameter."""


def _size_limit(max_concurrency: int, tenants: TenantPlan | None) -> int:
    """The largest job lane default can start: its pool's MAX, and its groups' limit."""
    group = None if tenants is None else tenants.default_limit
    return max_concurrency if group is None else min(max_concurrency, group)


def _stale(rng: random.Random, fault_ticks: int) -> dict[int, str]:
    """Maybe one stale key, of a pool, a lane or a gate, written before a fault tick."""
    if rng.random() >= STALE_SHARE:
        return {}
    return {rng.randrange(fault_ticks): rng.choice(["pools", "lanes", "gates"])}


def _batch_deliveries(events: EventPlan, rng: random.Random, *, faults: bool) -> None:
    """Half the scenarios deliver their end events in batches, through the end-event queue.

    Drawn from a generator of its own, so every other draw of a seed stays what it was.
    """
    if rng.random() < 0.5:
        return
    events.batch_size = rng.choice([1, 3, 10])
    events.batch_doubled = rng.choice([0.0, 0.2, 0.5])
    if faults:
        events.batch_lost = rng.choice([0.0, 0.0, 0.2])
        events.malformed = rng.choice([0.0, 0.3, 0.6])


WIDE_SHARE = 0.1
"""Of the scenarios, those whose rounds are wider than one receive batch (invariant 6's first wave)."""


@dataclass(frozen=True)
class Wide:
    """What makes a scenario wide: its MAX, its backlog and its start threads (0 sizes them)."""

    max_concurrency: int
    jobs: list[Job]
    start_concurrency: int


def _widen(rng: random.Random, plan: FaultPlan, *, faults: bool) -> Wide | None:
    """A tenth of the scenarios: rounds with more starts to send than their first wave may.

    MAX 12-30 over 15-35 jobs in about as many groups, and more start threads than one
    receive batch (32, or sized from the quota); with faults, half of them throttle every
    start. Drawn from a generator of its own, so every other draw of a seed stays what it was.
    """
    if rng.random() >= WIDE_SHARE:
        return None
    size = rng.randint(15, 35)
    jobs = backlog(rng, size, [f"w{index}" for index in range(size)], 1)
    if faults and rng.random() < 0.5:
        plan.throttle["StartExecution"] = 1.0
    return Wide(rng.choice([12, 20, 30]), jobs, rng.choice([0, 32]))


def _threads(drawn: int, wide: Wide | None) -> int:
    """The start threads: as drawn (so the draws after it stay), unless the scenario is wide."""
    return drawn if wide is None else wide.start_concurrency


def _plans(reruns: dict[int, CrashPlan | None]) -> dict[int, str]:
    return {tick: "" if plan is None else str(plan) for tick, plan in reruns.items()}


def _rates(rng: random.Random, operations: tuple[str, ...], share: float) -> dict[str, float]:
    return {operation: rng.choice([0.1, 0.3, 0.7]) for operation in operations if rng.random() < share}
