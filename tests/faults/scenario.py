"""Generated scenarios: a backlog, a MAX, a fault schedule; run them; check the invariants.

`Scenario.generate(seed)` draws everything from one seed, so any failure is replayed
with the same seed (with more than one start thread, the same faults may hit other
messages: concurrent requests reach the emulator in any order). `run_scenario` drives
the real handler against the faulty emulator: a scheduled tick at each step of the
schedule and, between them, a tick for every status change event the emulated
EventBridge delivers, each tick a cold start or a warm one. First with faults on, then
with faults and events off until the queue drains (liveness must not depend on best-
effort events). It returns an `Outcome`: what was processed, what was injected, and
every violation of the invariants in DESIGN.md, checked against the emulator's ground
truth.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import boto3

from dispatcher import handler
from dispatcher.core.control import Control
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS
from dispatcher.core.executions import MAX_INPUT_BYTES, execution_arn
from dispatcher.core.rerun import REDRIVE, RESTART, restart_name
from dispatcher.in_process import LocalContext
from dispatcher.local.account import REGION, environment
from dispatcher.local.stack import Stack, create_lane, create_stack, read_all
from dispatcher.settings import variable
from tests.faults.batches import EndEventBatches
from tests.faults.lanes import LANE, LanePlan, lanes_variable, plan_lane, steer_lane
from tests.faults.operator import RERUN_CRASH_POINTS, expire_holds, run_rerun
from tests.faults.process import DispatcherProcess, on_virtual_time
from tests.support.crashes import CRASH_POINTS, CrashPlan
from tests.support.faulty_aws import (
    REJECTED_INPUT_MARKER,
    VISIBILITY_TIMEOUT_SECONDS,
    FaultyAws,
    backend_execution,
)
from tests.support.world import EventPlan, Execution, FaultPlan, Lag, World, execution_event

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
MAX_DURATION_SECONDS = 120.0
MAX_LAG_SECONDS = 60.0

# What each kind of poison is, and the DispatchError it must get.
POISON_KINDS: dict[str, str] = {
    "invalid json": "input is not valid JSON",
    "blank body": "input is not valid JSON",
    "too large": f"larger than the {MAX_INPUT_BYTES}-byte Step Functions limit",
    "name with space": "invalid ExecutionName: execution name contains whitespace",
    "name too long": "invalid ExecutionName: execution name is 81 characters, longer than 80",
    "binary name": "ExecutionName attribute must be of type String, not Binary",
    "rejected input": "Step Functions rejected the start: InvalidExecutionInput",
    "name collision": "name collision",
}


@dataclass
class Job:
    """One message a producer sends, and what must become of it."""

    key: str
    group: str
    body: str
    arrives: int
    name: str | None = None
    name_type: str = "String"
    poison: str | None = None
    """The kind of poison (a key of POISON_KINDS), or None for a valid job."""
    duplicate_of: str | None = None
    """The key of the job this one repeats (same name, same input)."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Further message attributes, as SendMessage takes them."""
    message_id: str = ""
    lane: str | None = None
    """The lane whose queue it is sent to (None: lane default)."""

    @property
    def execution_name(self) -> str:
        """The execution this job must end as (valid jobs only)."""
        return self.name or self.message_id


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
    """A second lane on the same state machine and pool (`tests.faults.lanes`)."""

    @classmethod
    def generate(cls, seed: int, *, faults: bool = True) -> Scenario:
        """Draw a scenario; ``faults=False`` keeps only what AWS does anyway (lag, events as they come)."""
        rng = random.Random(seed)
        max_concurrency = rng.choice([1, 1, 2, 3, 4, 5, 8])
        groups = [f"g{index}" for index in range(rng.randint(1, 5))]
        arrival_ticks = rng.randint(1, 6)
        jobs = _backlog(rng, rng.randint(1, 24), groups, arrival_ticks)
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
        lane = plan_lane(random.Random(f"{seed}:lane"), jobs, fault_ticks, wide=wide is not None)
        reruns = {
            tick: (
                CrashPlan(*rng.choice(RERUN_CRASH_POINTS), nth=rng.randint(1, 2))
                if faults and rng.random() < 0.4
                else None
            )
            for tick in range(1, fault_ticks)
            if rng.random() < 0.25
        }
        return cls(
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
        )

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
        )


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
    jobs = _backlog(rng, size, [f"w{index}" for index in range(size)], 1)
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


def _backlog(rng: random.Random, size: int, groups: list[str], arrival_ticks: int) -> list[Job]:
    jobs: list[Job] = []
    named: list[Job] = []
    for index in range(size):
        key = f"{rng.getrandbits(32):08x}-{index}"
        group = rng.choice(groups)
        arrives = rng.randrange(arrival_ticks)
        seconds = rng.choice([0.0, 1.0, 10.0, 45.0, MAX_DURATION_SECONDS])
        downstream = rng.random() < 0.4
        body = json.dumps({"job": key, "seconds": seconds, **({"downstream": True} if downstream else {})})
        draw = rng.random()
        if draw < 0.12:
            jobs.append(_poison(rng, key, group, arrives, named))
        elif draw < 0.2 and named:
            original = rng.choice(named)
            # Same group, sent later: a redelivery from the producer's side.
            jobs.append(
                Job(
                    key,
                    original.group,
                    original.body,
                    max(arrives, original.arrives),
                    original.name,
                    duplicate_of=original.key,
                )
            )
        else:
            job = Job(key, group, body, arrives, name=f"job-{key}" if rng.random() < 0.5 else None)
            jobs.append(job)
            if job.name:
                named.append(job)
    return jobs


def _poison(  # noqa: PLR0911 — one return per kind of poison
    rng: random.Random, key: str, group: str, arrives: int, named: list[Job]
) -> Job:
    kind = rng.choice(list(POISON_KINDS))
    body = json.dumps({"job": key})
    if kind == "name collision" and named:
        original = rng.choice(named)
        return Job(key, original.group, body, max(arrives, original.arrives), original.name, poison=kind)
    if kind in {"name collision", "invalid json"}:
        return Job(key, group, f"{{not json {key}", arrives, poison="invalid json")
    if kind == "blank body":
        return Job(key, group, " \n\t", arrives, poison=kind)
    if kind == "too large":
        padding = "x" * (MAX_INPUT_BYTES - len(body) + 1)
        return Job(key, group, json.dumps({"job": key, "padding": padding}), arrives, poison=kind)
    if kind == "name with space":
        return Job(key, group, body, arrives, name=f"job {key}", poison=kind)
    if kind == "name too long":
        return Job(key, group, body, arrives, name="n" * 81, poison=kind)
    if kind == "binary name":
        return Job(key, group, body, arrives, name=f"job-{key}", name_type="Binary", poison=kind)
    return Job(key, group, json.dumps({"job": key, "note": REJECTED_INPUT_MARKER}), arrives, poison=kind)


@dataclass
class Outcome:
    """What one scenario processed and injected, and every invariant it broke."""

    scenario: Scenario
    messages: int = 0
    ticks: int = 0
    crashes: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    calls: set[Any] = field(default_factory=set)
    stack: Stack | None = None

    executions: int = 0
    """Executions the dispatcher started."""
    executions_in_fault_phase: int = 0
    event_ticks: int = 0
    warm_ticks: int = 0
    busy_ticks: int = 0
    """Ticks that found the lease held (by a tick that died holding it)."""
    failures: int = 0
    """Runs that failed (the downstream API was down)."""
    reruns: int = 0
    """`dispatcher rerun` runs, and of them, killed mid-way."""
    rerun_crashes: int = 0
    rerun_jobs: int = 0
    """Re-run jobs queued (restarts and redrives)."""
    rerun_switches: int = 0
    """Runs in the other mode after a killed one."""
    rerun_refused: int = 0
    """Failures a run skipped because an earlier run claimed them for the other mode."""
    redriven: int = 0
    """Executions the dispatcher redrove."""
    largest_blind_wave: int = 0
    """The most starts a round began before one came back (invariant 6 allows one receive batch)."""


@dataclass
class Tally:
    """Outcomes added up: what many scenarios processed, injected and broke."""

    scenarios: int = 0
    messages: int = 0
    poison: int = 0
    executions: int = 0
    ticks: int = 0
    event_ticks: int = 0
    warm_ticks: int = 0
    busy_ticks: int = 0
    crashes: int = 0
    failures: int = 0
    reruns: int = 0
    rerun_crashes: int = 0
    rerun_jobs: int = 0
    rerun_switches: int = 0
    rerun_refused: int = 0
    redriven: int = 0
    wide: int = 0
    laned: int = 0
    """Scenarios with a second lane (`tests.faults.lanes`)."""
    lane_jobs: int = 0
    lane_pauses: int = 0
    rated: int = 0
    largest_blind_wave: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def add(self, outcome: Outcome) -> None:
        """Count one scenario's outcome."""
        self.scenarios += 1
        self.messages += outcome.messages
        self.poison += sum(job.poison is not None for job in outcome.scenario.jobs)
        self.executions += outcome.executions
        self.ticks += outcome.ticks
        self.event_ticks += outcome.event_ticks
        self.warm_ticks += outcome.warm_ticks
        self.busy_ticks += outcome.busy_ticks
        self.crashes += outcome.crashes
        self.failures += outcome.failures
        self.reruns += outcome.reruns
        self.rerun_crashes += outcome.rerun_crashes
        self.rerun_jobs += outcome.rerun_jobs
        self.rerun_switches += outcome.rerun_switches
        self.rerun_refused += outcome.rerun_refused
        self.redriven += outcome.redriven
        self.wide += outcome.scenario.wide
        lane = outcome.scenario.lane
        if lane is not None:
            self.laned += 1
            self.lane_jobs += sum(job.lane is not None for job in outcome.scenario.jobs)
            self.lane_pauses += sum(lane.pauses.values())
            self.rated += lane.starts_per_second is not None
        self.largest_blind_wave = max(self.largest_blind_wave, outcome.largest_blind_wave)
        self.injected.update(outcome.injected)
        self.violations.extend(
            f"seed {outcome.scenario.seed}: {violation}\n    {outcome.scenario.describe()}"
            for violation in outcome.violations
        )

    def as_dict(self) -> dict[str, Any]:
        """The tally as JSON-ready data (a pytest-xdist worker sends it to the controller)."""
        return {**asdict(self), "injected": dict(self.injected)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tally:
        """A tally sent by `as_dict`."""
        return cls(**{**data, "injected": Counter(data["injected"])})

    def merge(self, other: Tally) -> None:
        """Fold in another tally (another worker's)."""
        for name in (
            "scenarios",
            "messages",
            "poison",
            "executions",
            "ticks",
            "event_ticks",
            "warm_ticks",
            "busy_ticks",
            "crashes",
            "failures",
            "reruns",
            "rerun_crashes",
            "rerun_jobs",
            "rerun_switches",
            "rerun_refused",
            "redriven",
            "wide",
            "laned",
            "lane_jobs",
            "lane_pauses",
            "rated",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.largest_blind_wave = max(self.largest_blind_wave, other.largest_blind_wave)
        self.injected.update(other.injected)
        self.violations.extend(other.violations)

    def faults(self) -> int:
        """Every fault injected: into requests, and crashes of ticks and of `rerun`."""
        return sum(self.injected.values()) + self.crashes + self.rerun_crashes

    def report(self) -> list[str]:
        """The figures, one per line."""
        lines = [
            f"  messages sent{'':<35} {self.messages:>9,} ({self.poison:,} poison)",
            f"  executions started{'':<30} {self.executions:>9,}",
            f"  ticks{'':<43} {self.ticks:>9,}",
            f"    {'triggered by a status change event':<44} {self.event_ticks:>9,}",
            f"    {'warm (the previous tick' + chr(39) + 's container)':<44} {self.warm_ticks:>9,}",
            f"    {'busy (a dead tick still held the lease)':<44} {self.busy_ticks:>9,}",
            f"  runs failed (downstream API down){'':<15} {self.failures:>9,}",
            f"  `dispatcher rerun` runs{'':<25} {self.reruns:>9,}",
            f"    {'re-run jobs queued':<44} {self.rerun_jobs:>9,}",
            f"    {'runs in the other mode after a kill':<44} {self.rerun_switches:>9,}",
            f"    {'failures skipped: queued the other way':<44} {self.rerun_refused:>9,}",
            f"    {'executions redriven by the dispatcher':<44} {self.redriven:>9,}",
            f"  wide scenarios (MAX over one receive batch){'':<5} {self.wide:>9,}",
            f"    {'most starts a round sent before one came back':<44} {self.largest_blind_wave:>9,}",
            f"  scenarios with a second lane (shared machine){'':<3} {self.laned:>9,}",
            f"    {'jobs sent to it':<44} {self.lane_jobs:>9,}",
            f"    {'with a start rate':<44} {self.rated:>9,}",
            f"    {'paused, then resumed, by the operator':<44} {self.lane_pauses:>9,}",
            f"  faults injected{'':<33} {self.faults():>9,}",
            f"    {'process crashes':<44} {self.crashes:>9,}",
            f"    {'`dispatcher rerun` killed mid-way':<44} {self.rerun_crashes:>9,}",
        ]
        lines += [f"    {kind:<44} {count:>9,}" for kind, count in sorted(self.injected.items())]
        lines.append(f"  violations{'':<38} {len(self.violations):>9,}")
        lines += [f"  ! {violation}" for violation in self.violations[:20]]
        return lines


FINISHED = Tally()
"""Every scenario run in this process (the test session prints it)."""


class ScenarioRun:
    """One scenario against one emulator: send, tick, advance time, then check."""

    def __init__(self, scenario: Scenario, middleware: FaultyAws) -> None:
        self.scenario = scenario
        self.world = World(
            seed=scenario.seed, start=1_800_000_000.0, faults=scenario.faults, events=scenario.events
        )
        self.rng = random.Random(f"{scenario.seed}:ticks")
        self.world.max_concurrency = scenario.max_concurrency
        middleware.world = self.world
        boto3.setup_default_session()  # no hooks of an earlier run's dispatcher on our own clients
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.ssm = boto3.client("ssm", region_name=REGION)
        control = Control(max_concurrency=scenario.max_concurrency) if scenario.controlled else None
        self.stack: Stack = create_stack(f"s{scenario.seed}-{uuid.uuid4().hex[:6]}", control=control)
        self.lane: dict[str, Any] | None = None
        if scenario.lane is not None:
            self.lane = create_lane(
                self.stack.name,
                LANE,
                state_machine_arn=self.stack.state_machine_arn,
                priority=scenario.lane.priority,
                **(
                    {}
                    if scenario.lane.starts_per_second is None
                    else {"starts_per_second": scenario.lane.starts_per_second}
                ),
            )
        self.process = DispatcherProcess().install()
        self.batches = EndEventBatches(
            self.world, random.Random(f"{scenario.seed}:batches"), self.stack.state_machine_arn
        )
        self.outcome = Outcome(scenario)
        self.event_ticks = 0
        self.warm_ticks = 0
        self.redrive_after: dict[str, float] = {}
        self.redrives: list[tuple[float, str]] = []
        self.lease_may_be_held_until = 0.0
        self.enclosing: list[float] = []
        """Until when each tick still running (this one's callers) may hold the lease."""
        self.world.outage_until = self.world.now + scenario.outage_seconds
        self.redrive_jobs: set[tuple[str, int]] = set()
        """(execution name, redriveCount) of every redrive job `rerun` sent."""
        self.restart_jobs: set[str] = set()
        self.rerun_mode = scenario.rerun_mode
        """The mode the operator runs `rerun` in now (switched after a kill, with ``rerun_switch``)."""
        self.modes_used: set[str] = set()

    def environment(self, **overrides: str) -> dict[str, str]:
        """The function's environment for this scenario."""
        return {
            **self.stack.environment(
                # Controlled: the parameter's MAX must win over a higher environment MAX.
                self.scenario.max_concurrency + (CONTROL_OVERRIDE if self.scenario.controlled else 0),
                receive_wait_seconds=0,
                start_concurrency=self.scenario.start_concurrency,
            ),
            variable("spool_queue_url"): self.stack.spool_queue_url,
            **({} if self.lane is None else {variable("lanes"): lanes_variable(self.lane)}),
            **overrides,
        }

    @property
    def queues(self) -> list[tuple[str, str]]:
        """(job queue, dead-letter queue) of each lane, default first."""
        found = [(self.stack.queue_url, self.stack.dead_letter_queue_url)]
        if self.lane is not None:
            found.append((self.lane["queue_url"], self.lane["dead_letter_queue_url"]))
        return found

    def run(self) -> Outcome:
        """Fault phase, then a quiet phase until drained, then the checks."""
        with on_virtual_time(self.world, self.advance), environment(self.environment()):
            for tick in range(self.scenario.fault_ticks):
                for job in self.scenario.jobs:
                    if job.arrives == tick:
                        self.send(job)
                self._start_external(tick)
                self._misdirect(tick)
                if tick in self.scenario.reruns:
                    self._rerun(self.scenario.reruns[tick])
                self._tick(tick)
                self.advance(self.scenario.intervals[tick])
            self.outcome.executions_in_fault_phase = self._dispatcher_executions()
            self._drain()
            self._rerun_what_failed()
        self._check_end_state()
        outcome = self.outcome
        outcome.injected = self.world.injected
        outcome.violations[:0] = self.world.violations + self.process.violations
        outcome.largest_blind_wave = self.process.largest_blind_wave
        outcome.calls = set(self.process.calls)
        outcome.stack = self.stack
        outcome.messages = len(self.scenario.jobs)
        outcome.executions = self._dispatcher_executions()
        outcome.event_ticks = self.event_ticks
        outcome.warm_ticks = self.warm_ticks
        outcome.redriven = len(self.world.dispatcher_redrives)
        FINISHED.add(outcome)
        return outcome

    # -- driving ----------------------------------------------------------------------

    def _dispatcher_executions(self) -> int:
        return sum(execution.by_dispatcher for execution in self.world.executions.values())

    def send(self, job: Job) -> str:
        """Send one job as a producer would; note and return its MessageId."""
        request: dict[str, Any] = {
            "QueueUrl": self.stack.queue_url
            if job.lane is None or self.lane is None
            else self.lane["queue_url"],
            "MessageBody": job.body,
            "MessageGroupId": job.group,
            "MessageDeduplicationId": job.key,
        }
        attributes = dict(job.attributes)
        if job.name is not None:
            value_field = "BinaryValue" if job.name_type == "Binary" else "StringValue"
            value = job.name.encode() if job.name_type == "Binary" else job.name
            attributes["ExecutionName"] = {"DataType": job.name_type, value_field: value}
        if attributes:
            request["MessageAttributes"] = attributes
        job.message_id = self.sqs.send_message(**request)["MessageId"]
        return job.message_id

    def tick(self, event: Any = None, *, cold: bool = True, **overrides: str) -> dict[str, Any]:
        """One tick with the function's environment (and overrides), on the virtual clock."""
        with on_virtual_time(self.world, self.advance), environment(self.environment(**overrides)):
            report = self.process.tick(event=event, cold=cold)
        assert report is not None
        return report

    def _start_external(self, tick: int) -> None:
        seconds = self.scenario.external.get(tick)
        if seconds is not None:
            self.sfn.start_execution(
                stateMachineArn=self.stack.state_machine_arn,
                name=f"external-{tick}",
                input=json.dumps({"seconds": seconds}),
            )
            redrive_after = self.scenario.redrives.get(tick)
            if redrive_after is not None:
                arn = execution_arn(self.stack.state_machine_arn, f"external-{tick}")
                self.redrive_after[arn] = redrive_after

    def _rerun(self, crash: CrashPlan | None, mode: str | None = None) -> None:
        """The operator runs `dispatcher rerun`; killed, its held spool messages come back later.

        With ``rerun_switch``, the runs after the first killed one are in the other mode;
        failures an earlier run queued the other way are skipped, and the operator then
        does as the skip says (runs that mode once).
        """
        mode = mode or self.rerun_mode
        self.modes_used.add(mode)
        if mode != self.scenario.rerun_mode:
            self.outcome.rerun_switches += 1
        result, sent = run_rerun(mode, crash)
        self.outcome.reruns += 1
        if result.crashed and self.scenario.rerun_switch:
            self.rerun_mode = REDRIVE if self.scenario.rerun_mode == RESTART else RESTART
        refusals = [
            match.group(1)
            for skipped in result.skipped
            if (match := ADVICE.search(skipped.get("skipped", ""))) is not None
        ]
        self.outcome.rerun_refused += len(refusals)
        for entry in sent:
            attributes = {
                key: value["StringValue"] for key, value in entry.get("MessageAttributes", {}).items()
            }
            if "RedriveCount" in attributes:
                self.redrive_jobs.add((attributes["ExecutionName"], int(attributes["RedriveCount"])))
            else:
                self.restart_jobs.add(attributes["ExecutionName"])
        self.outcome.rerun_jobs += len(result.queued)
        if result.crashed:
            self.outcome.rerun_crashes += 1
            expire_holds(self.stack.spool_queue_url)
        elif result.exit_status != 0:
            # An AWS error that outlived the CLI's retries: the operator runs it again later.
            self.world.injected["`dispatcher rerun` failed on AWS errors"] += 1
        for other in sorted(set(refusals) - {mode}):
            if mode == self.rerun_mode:  # not from inside an advised run
                self._rerun(None, other)

    def _spooled(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.stack.spool_queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def _rerun_what_failed(self) -> None:
        """The outage is over: re-run whatever is spooled, and drain, until nothing failed is left."""
        self.world.outage_until = 0.0
        for _ in range(3):
            expire_holds(self.stack.spool_queue_url)
            if not self._spooled():
                return
            self._rerun(None)
            self._drain()
        if self._spooled():
            self.outcome.violations.append(f"loss: {self._spooled()} spooled failure(s) never re-run")

    def _misdirect(self, tick: int) -> None:
        """An event that must change nothing: for another state machine, or a RUNNING status."""
        kind = self.scenario.misdirected.get(tick)
        running = [execution for execution in self.world.running() if execution.by_dispatcher]
        if kind is None or not running:
            return
        execution = self.rng.choice(running)
        if kind == "other machine":
            event = execution_event(execution, "SUCCEEDED", self.stack.state_machine_arn + "-other")
            event["detail"]["stopDate"] = int(self.world.now * 1000)
        else:
            event = execution_event(execution, "RUNNING")
        self.world.injected[f"misdirected event ({kind})"] += 1
        self._tick(None, event=event)

    def _steer_lane(self, tick: int | None) -> None:
        """The operator pauses or resumes the lane before this tick, as the plan says."""
        plan = self.scenario.lane
        if plan is not None and tick is not None and tick in plan.pauses:
            steer_lane(self.ssm, self.stack.control_parameter, paused=plan.pauses[tick])

    def _tick(self, tick: int | None, event: Any = None) -> dict[str, Any] | None:
        quiet = not self.world.faults.enabled
        if event is None:
            self._steer_lane(tick)
        if event is None:
            crash = self.scenario.crashes.get(tick) if tick is not None else None
        elif not quiet and self.rng.random() < self.scenario.event_crash_rate:
            crash = self.scenario.event_crash or CrashPlan(
                *self.rng.choice(CRASH_POINTS), nth=self.rng.randint(1, 2)
            )
        else:
            crash = None
        deadline = self.scenario.deadlines.get(tick) if tick is not None else None
        cold = self.rng.random() >= self.scenario.warm
        self.outcome.ticks += 1
        self.event_ticks += event is not None
        self.warm_ticks += not cold
        began = self.world.now
        # A tick that waits (a loop's pause, a holder waiting for the next ask) lets
        # virtual time pass, and events due meanwhile tick inside it: they may find the
        # lease held by the tick around them, until its invocation's time would run out.
        self.enclosing.append(began + LocalContext().get_remaining_time_in_millis() / 1000)
        try:
            report = self.process.tick(event=event, cold=cold, crash=crash, deadline_after=deadline)
        except Exception as error:
            self.outcome.violations.append(
                f"tick {self.outcome.ticks} raised {type(error).__name__}: {error}"
            )
            return None
        finally:
            self.enclosing.pop()
        if report is None or report["stopped"] != "busy":
            # This tick may have left the lease behind (it died, or a write's answer was
            # lost), but only until its invocation's time would have run out.
            self.lease_may_be_held_until = began + LocalContext().get_remaining_time_in_millis() / 1000
        if report is None:
            self.outcome.crashes += 1
            return None
        if report["stopped"] == "busy":
            self.outcome.busy_ticks += 1
            if self.world.now > max([self.lease_may_be_held_until, *self.enclosing]):
                self.outcome.violations.append(
                    f"stall: tick {self.outcome.ticks} found the lease held at {self.world.now:.1f},"
                    f" when the last lease taken had expired at {self.lease_may_be_held_until:.1f}"
                )
            if report["started"]:
                self.outcome.violations.append(
                    f"overlap: a tick without the lease started {report['started']}"
                )
        return report

    def advance(self, seconds: float) -> None:
        """Let virtual time pass: executions end, events arrive (each one a tick), messages reappear."""
        target = self.world.now + seconds
        while True:
            moment = self.world.next_moment()
            if moment is None or moment > target:
                break
            self._move(max(0.0, moment - self.world.now))
            for event in self.batches.invocations(self.world.due_events()):
                self._tick(None, event=event)
        self._move(target - self.world.now)

    def _move(self, seconds: float) -> None:
        def end(execution: Execution) -> None:
            record = backend_execution(execution.arn)
            record.status = execution.runs[-1].status
            self.outcome.failures += record.status == "FAILED"
            record.stop_date = record.stop_date or record.start_date
            redrive_after = self.redrive_after.pop(execution.arn, None)
            if redrive_after is not None:
                self.redrives.append((self.world.now + redrive_after, execution.arn))

        self.world.advance(seconds, end)
        for event in self.world.take_spooled():
            self.sqs.send_message(QueueUrl=self.stack.spool_queue_url, MessageBody=json.dumps(event))
        for at, arn in list(self.redrives):
            if at <= self.world.now:
                self.redrives.remove((at, arn))
                self.world.redrive(arn, MAX_DURATION_SECONDS)
                backend_execution(arn).status = "RUNNING"
                self.world.injected["foreign execution redriven"] += 1
        for handle in self.world.expired_in_flight():
            # A handle that fails belongs to a message deleted or received again since (or
            # to the other lane's queue).
            for queue_url, _ in self.queues:
                with contextlib.suppress(self.sqs.exceptions.ClientError):
                    self.sqs.change_message_visibility(
                        QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0
                    )

    def _drain(self) -> None:
        """Faults and events off: wait out visibility timeouts and recorded starts, then tick to the end."""
        self.world.faults.quiet()
        self.world.events.enabled = False
        self.world.deliveries.clear()
        # Someone else's redrive during the drain would start an execution the list can't
        # show yet, and the exact count below could not be checked.
        self.redrive_after.clear()
        self.redrives.clear()
        if self.scenario.lane is not None and self.scenario.lane.pauses:
            steer_lane(self.ssm, self.stack.control_parameter, paused=False)
            handler.reset_clients()  # the control parameter's cache (5 s) is long expired by the end
        self.advance(VISIBILITY_TIMEOUT_SECONDS + RECENT_START_WINDOW_SECONDS + MAX_LAG_SECONDS + 1)
        left = self._visible_messages()
        # One tick per MAX messages, one to see the queue empty, one spare; and one more per
        # name collision, which waits a tick if DescribeExecution doesn't show the original yet.
        collisions = sum(job.poison == "name collision" for job in self.scenario.jobs)
        bound = math.ceil(left / self.scenario.max_concurrency) + 2 + collisions
        if self.scenario.lane is not None and self.scenario.lane.starts_per_second is not None:
            # Each quiet tick starts at most one bucket of the lane's jobs (it refills in between).
            bound += math.ceil(sum(self.queue_counts(self.lane)) / self.scenario.lane.burst())
        settle = MAX_DURATION_SECONDS + MAX_LAG_SECONDS + 1
        for _ in range(bound):
            running = len(self.world.running())
            report = self._tick(None)
            if report is None:
                return
            if report["running"] != running:
                self.outcome.violations.append(
                    f"leak: with faults off the tick counted {report['running']} RUNNING, truly {running}"
                )
            if report["stopped"] not in {"capacity", "drained", "throttled"}:
                self.outcome.violations.append(f"liveness: a quiet tick stopped with {report['stopped']!r}")
            self.advance(settle)
            if report["stopped"] == "drained" and self._visible_messages() == 0:
                return
        self.outcome.violations.append(
            f"liveness: {left} message(s) not drained within {bound} quiet ticks"
            f" at MAX {self.scenario.max_concurrency}"
        )

    def queue_counts(self, lane: dict[str, Any] | None = None) -> tuple[int, int]:
        """(visible, in flight) messages on the source queue (or on ``lane``'s)."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.stack.queue_url if lane is None else lane["queue_url"],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]), int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def _visible_messages(self) -> int:
        return sum(self.queue_counts()) + (0 if self.lane is None else sum(self.queue_counts(self.lane)))

    def dead_letters(self) -> dict[str, list[dict[str, Any]]]:
        """Every DLQ message (deleted once read), by its deduplication id (the source MessageId).

        Each message's ``Lane`` says whose DLQ held it (None: lane default's).
        """
        letters: dict[str, list[dict[str, Any]]] = {}
        for lane, (_, dead_letter_url) in zip([None, LANE], self.queues, strict=False):
            for message in read_all(dead_letter_url, self.sqs):
                message["Lane"] = lane
                letters.setdefault(message["Attributes"]["MessageDeduplicationId"], []).append(message)
        return letters

    # -- checking ---------------------------------------------------------------------

    def _check_end_state(self) -> None:
        violations = self.outcome.violations
        jobs = self.scenario.jobs
        left = self._visible_messages()
        if left:
            violations.append(f"loss: {left} message(s) still on the source queue at the end")
        ours = {
            execution.name: execution
            for execution in self.world.executions.values()
            if execution.by_dispatcher
        }
        expected = {job.execution_name for job in jobs if job.poison is None}
        restarts = self._restarts(ours)
        for name in sorted(expected - ours.keys()):
            violations.append(f"loss: no execution for {name}")
        for name in sorted(ours.keys() - expected - restarts.keys()):
            violations.append(f"duplicate: unexpected execution {name}")
        self._check_reruns(ours, restarts)
        for job in jobs:
            execution = ours.get(job.execution_name)
            if job.poison is None and execution is not None and execution.input != job.body:
                violations.append(f"input: {job.execution_name} started with another input")
        self._check_dead_letters()
        self._check_order(ours)

    def _restarts(self, ours: dict[str, Execution]) -> dict[str, Execution]:
        """Restart name → the failed execution it re-runs (any execution of ours that ever failed)."""
        return {
            restart_name(execution.name, execution.arn): execution
            for execution in ours.values()
            if any(run.status == "FAILED" for run in execution.runs)
        }

    def _check_reruns(self, ours: dict[str, Execution], restarts: dict[str, Execution]) -> None:
        """Every failure re-run once, in a mode the operator ran: restarted or redriven, never both."""
        violations = self.outcome.violations
        redriven = {name for name, _ in self.world.dispatcher_redrives}
        for name, count in self.world.dispatcher_redrives:
            if (name, count) not in self.redrive_jobs:
                violations.append(
                    f"duplicate: {name} redriven at redriveCount {count}, which no job asked for"
                )
        if RESTART not in self.modes_used and self.restart_jobs:
            violations.append(f"rerun: restart jobs, but no restart run: {sorted(self.restart_jobs)}")
        for execution in ours.values():
            final = execution.runs[-1]
            restart = ours.get(restart_name(execution.name, execution.arn))
            if final.status == "SUCCEEDED" and execution.name in redriven and restart is not None:
                violations.append(f"duplicate: {execution.name} redriven and restarted for one failure")
            if final.status != "FAILED":
                continue
            if restart is None:
                violations.append(f"loss: {execution.name} failed and was never re-run")
            elif restart.input != execution.input:
                violations.append(f"input: the restart of {execution.name} has another input")
        if RESTART not in self.modes_used:
            for name in sorted(restarts.keys() & ours.keys()):
                violations.append(f"rerun: {name} restarted, but no restart run")

    def _check_dead_letters(self) -> None:
        letters = self.dead_letters()
        for job in self.scenario.jobs:
            found = letters.pop(job.message_id, [])
            if job.poison is None:
                if found:
                    violations = self.outcome.violations
                    reason = found[0].get("MessageAttributes", {}).get("DispatchError", {}).get("StringValue")
                    violations.append(f"dead-lettered a valid job {job.key}: {reason}")
                continue
            if len(found) != 1:
                self.outcome.violations.append(
                    f"poison {job.key} ({job.poison}) is {len(found)} times in the DLQ"
                )
                continue
            [letter] = found
            if letter["Lane"] != job.lane:
                wrong = letter["Lane"] or "default"
                self.outcome.violations.append(
                    f"poison {job.key} of lane {job.lane or 'default'} in {wrong}'s DLQ"
                )
            reason = letter.get("MessageAttributes", {}).get("DispatchError", {}).get("StringValue", "")
            if POISON_KINDS[job.poison] not in reason or letter["Body"] != job.body:
                self.outcome.violations.append(f"poison {job.key} ({job.poison}) dead-lettered as {reason!r}")
        for dedup_id in letters:
            self.outcome.violations.append(f"DLQ holds a message that was never sent as poison: {dedup_id}")

    def _check_order(self, ours: dict[str, Execution]) -> None:
        by_group: dict[str, list[int]] = {}
        for job in sorted(self.scenario.jobs, key=lambda job: job.arrives):  # stable: send order
            execution = ours.get(job.execution_name)
            if job.poison is None and job.duplicate_of is None and execution is not None:
                by_group.setdefault(job.group, []).append(execution.sequence)
        for group, sequence in by_group.items():
            if sequence != sorted(sequence):
                self.outcome.violations.append(f"order: group {group} started out of send order {sequence}")


def run_scenario(scenario: Scenario, middleware: FaultyAws) -> Outcome:
    """Run one scenario against the faulty emulator behind ``middleware``."""
    return ScenarioRun(scenario, middleware).run()
