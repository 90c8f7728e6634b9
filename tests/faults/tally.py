"""What scenarios processed, injected and broke: one `Outcome` each, added up in a `Tally`."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dispatcher.core.kinds import total_keys
from dispatcher.core.kinds.gate import GATE
from dispatcher.core.topology import LANE

if TYPE_CHECKING:
    from dispatcher.local.stack import Stack
    from tests.faults.scenario import Scenario


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
    admissions: int = 0
    """Executions a gate admitted (`SendTaskSuccess` taken)."""
    refused_tokens: int = 0
    """`SendTaskSuccess` calls refused (tokens used already, or closed)."""
    gate: dict[str, Any] | None = None
    """The gate's entry of ``LANES``, when the scenario had one."""
    reported: Counter[str] = field(default_factory=Counter)
    """What the ticks' return values said of their messages, by key (`dispatcher.core.outcomes`)."""
    follow: Counter[str] = field(default_factory=Counter)
    """The producer's cancellations and deadlines, by what became of them (`tests.faults.following`)."""
    adaptive: Counter[str] = field(default_factory=Counter)
    """An adaptive pool's limit: its writes and cuts, by what they were (`tests.faults.adaptive`)."""


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
    own_machine: int = 0
    """Of those, with a state machine of its own in pool default; and in a pool of its own."""
    own_pool: int = 0
    lane_max: int = 0
    """Of those, with a MAX of its own; and whose pool's MAX the operator changed live."""
    pool_changes: int = 0
    gated: int = 0
    """Scenarios with a gate (`tests.faults.gates`)."""
    gate_shared: int = 0
    """Of those, in pool default with the default lane's jobs; the others in a pool of their own."""
    gate_max: int = 0
    gate_and_lane: int = 0
    """Scenarios with a gate and a second lane; of those, with both in pool default."""
    gate_and_lane_one_pool: int = 0
    crossing: int = 0
    """Repeats of a named job sent to the second lane: two lanes admit one execution name."""
    gated_executions: int = 0
    admissions: int = 0
    refused_tokens: int = 0
    gate_crashes: int = 0
    """Ticks planned to die at a gate's own step."""
    tenanted: int = 0
    """Scenarios where some member counts by message group (`tests.faults.tenants`)."""
    default_limited: int = 0
    default_fair: int = 0
    lane_tenants: int = 0
    """Of those, the second lane with a limit per group or fair share; the gate with a limit."""
    gate_tenants: int = 0
    mixed_tenants: int = 0
    """With a lane and the gate in pool default, one of them counting by group."""
    long_jobs: int = 0
    largest_blind_wave: int = 0
    reported: Counter[str] = field(default_factory=Counter)
    """What the ticks' return values said of their messages, by key, added up."""
    follow: Counter[str] = field(default_factory=Counter)
    """The producers' cancellations and deadlines, added up."""
    followed: int = 0
    """Scenarios whose producer cancels or bounds jobs."""
    adaptive: Counter[str] = field(default_factory=Counter)
    """The adaptive pools' limits, added up."""
    adapting: int = 0
    """Scenarios with an adaptive pool default."""
    waking: int = 0
    """Scenarios whose producer wakes the dispatcher after queueing (`tests.faults.waking`)."""
    sized: int = 0
    """Scenarios whose jobs have sizes (`tests.faults.sizes`)."""
    sized_jobs: int = 0
    """Their valid jobs of more than one slot."""
    too_large: int = 0
    """Their jobs larger than any MAX (dead-lettered ``too large:``)."""
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
            self.own_machine += lane.kind == "own"
            self.own_pool += lane.kind == "pool"
            self.lane_max += lane.max_concurrency is not None
            self.pool_changes += len(lane.pool_changes)
            self.crossing += len(lane.crossing)
        gate = outcome.scenario.gate
        if gate is not None:
            self.gated += 1
            self.gate_shared += gate.kind == "shared"
            self.gate_max += gate.max_concurrency is not None
            if lane is not None:
                self.gate_and_lane += 1
                self.gate_and_lane_one_pool += gate.kind == "shared" and lane.kind != "pool"
            self.gated_executions += len(gate.executions)
            self.admissions += outcome.admissions
            self.refused_tokens += outcome.refused_tokens
            self.gate_crashes += len(gate.crashes)
        self._add_tenants(outcome)
        self.largest_blind_wave = max(self.largest_blind_wave, outcome.largest_blind_wave)
        self.reported.update(outcome.reported)
        self.follow.update(outcome.follow)
        self.adaptive.update(outcome.adaptive)
        self._add_kinds(outcome.scenario)
        self.injected.update(outcome.injected)
        self.violations.extend(
            f"seed {outcome.scenario.seed}: {violation}\n    {outcome.scenario.describe()}"
            for violation in outcome.violations
        )

    def _add_tenants(self, outcome: Outcome) -> None:
        tenants, gate = outcome.scenario.tenants, outcome.scenario.gate
        if tenants is None:
            return
        self.tenanted += 1
        self.default_limited += tenants.default_limit is not None
        self.default_fair += tenants.default_fair
        self.lane_tenants += tenants.lane_limit is not None or tenants.lane_fair
        self.gate_tenants += tenants.gate_limit is not None
        self.mixed_tenants += gate is not None and gate.kind == "shared"
        self.long_jobs += tenants.long_jobs

    def _add_kinds(self, scenario: Scenario) -> None:
        """Count what the scenario's producer and pool do: cancel or bound, adapt, wake."""
        self.followed += scenario.follow is not None
        self.adapting += scenario.adaptive is not None
        self.waking += scenario.wakes is not None
        if scenario.sizes is not None:
            self.sized += 1
            self.sized_jobs += scenario.sizes.sized
            self.too_large += scenario.sizes.too_large

    def as_dict(self) -> dict[str, Any]:
        """The tally as JSON-ready data (a pytest-xdist worker sends it to the controller)."""
        counters = {
            "injected": dict(self.injected),
            "reported": dict(self.reported),
            "follow": dict(self.follow),
            "adaptive": dict(self.adaptive),
        }
        return {**asdict(self), **counters}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tally:
        """A tally sent by `as_dict`."""
        counters = {name: Counter(data[name]) for name in ("injected", "reported", "follow", "adaptive")}
        return cls(**{**data, **counters})

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
            "own_machine",
            "own_pool",
            "lane_max",
            "pool_changes",
            "gated",
            "gate_shared",
            "gate_max",
            "gate_and_lane",
            "gate_and_lane_one_pool",
            "crossing",
            "gated_executions",
            "admissions",
            "refused_tokens",
            "gate_crashes",
            "tenanted",
            "default_limited",
            "default_fair",
            "lane_tenants",
            "gate_tenants",
            "mixed_tenants",
            "long_jobs",
            "followed",
            "adapting",
            "waking",
            "sized",
            "sized_jobs",
            "too_large",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.largest_blind_wave = max(self.largest_blind_wave, other.largest_blind_wave)
        self.reported.update(other.reported)
        self.follow.update(other.follow)
        self.adaptive.update(other.adaptive)
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
            f"    {'triggered by an event (ends, releases, wakes)':<44} {self.event_ticks:>9,}",
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
            f"  scenarios with a second lane{'':<21} {self.laned:>9,}",
            f"    {'jobs sent to it':<44} {self.lane_jobs:>9,}",
            f"    {'its own state machine, in pool default':<44} {self.own_machine:>9,}",
            f"    {'its own state machine and pool':<44} {self.own_pool:>9,}",
            f"    {'with a MAX of its own':<44} {self.lane_max:>9,}",
            f"    {'with a start rate':<44} {self.rated:>9,}",
            f"    {'paused, then resumed, by the operator':<44} {self.lane_pauses:>9,}",
            f"    {'its pool' + chr(39) + 's MAX changed live by the operator':<44} {self.pool_changes:>9,}",
            f"    {'a named job' + chr(39) + 's repeat sent to it':<44} {self.crossing:>9,}",
            f"  scenarios with a gate{'':<28} {self.gated:>9,}",
            f"    {'in pool default, with the default lane' + chr(39) + 's jobs':<44} {self.gate_shared:>9,}",
            f"    {'in a pool of its own':<44} {self.gated - self.gate_shared:>9,}",
            f"    {'with a MAX of its own':<44} {self.gate_max:>9,}",
            f"    {'with a second lane too':<44} {self.gate_and_lane:>9,}",
            f"    {'  the gate and both lanes in pool default':<44} {self.gate_and_lane_one_pool:>9,}",
            f"    {'gated executions':<44} {self.gated_executions:>9,}",
            f"    {'admitted (SendTaskSuccess taken)':<44} {self.admissions:>9,}",
            f"    {'SendTaskSuccess refused (used, or closed)':<44} {self.refused_tokens:>9,}",
            f"    {'ticks planned to die at a gate' + chr(39) + 's own step':<44} {self.gate_crashes:>9,}",
            f"  scenarios counting by message group{'':<13} {self.tenanted:>9,}",
            f"    {'lane default with max_per_group':<44} {self.default_limited:>9,}",
            f"    {'lane default with fair_share':<44} {self.default_fair:>9,}",
            f"    {'the second lane by group':<44} {self.lane_tenants:>9,}",
            f"    {'the gate with max_per_group':<44} {self.gate_tenants:>9,}",
            f"    {'a gate and a lane in pool default':<44} {self.mixed_tenants:>9,}",
            f"    {'jobs running 400 s (past every window)':<44} {self.long_jobs:>9,}",
            f"  scenarios whose producer cancels or bounds{'':<6} {self.followed:>9,}",
            *(f"    {what:<44} {self.follow[what]:>9,}" for what in FOLLOW_FIGURES),
            f"  scenarios with an adaptive pool default{'':<9} {self.adapting:>9,}",
            *(f"    {what:<44} {self.adaptive[what]:>9,}" for what in ADAPTIVE_FIGURES),
            f"  scenarios whose producer wakes the dispatcher{'':<3} {self.waking:>9,}",
            *(f"    {what:<44} {self.injected[what]:>9,}" for what in WAKE_FIGURES),
            f"  scenarios with jobs of several slots{'':<12} {self.sized:>9,}",
            f"    {'jobs of more than one slot':<44} {self.sized_jobs:>9,}",
            f"    {'jobs larger than any MAX (too large)':<44} {self.too_large:>9,}",
            f"  what the ticks said of their messages{'':<11} {sum(self.reported.values()):>9,}",
            *(f"    {key:<44} {self.reported[key]:>9,}" for key in total_keys((LANE, GATE))),
            f"  faults injected{'':<33} {self.faults():>9,}",
            f"    {'process crashes':<44} {self.crashes:>9,}",
            f"    {'`dispatcher rerun` killed mid-way':<44} {self.rerun_crashes:>9,}",
        ]
        lines += [f"    {kind:<44} {count:>9,}" for kind, count in sorted(self.injected.items())]
        lines.append(f"  violations{'':<38} {len(self.violations):>9,}")
        lines += [f"  ! {violation}" for violation in self.violations[:20]]
        return lines


FOLLOW_FIGURES = (
    "jobs cancelled between ticks",
    "  of them answered cancelled",
    "jobs cancelled while a tick was in flight",
    "  answered cancelled (never started)",
    "  answered already started (the tick won)",
    "message groups cancelled",
    "jobs with a StartBy",
    "jobs expired (dead-lettered, expired:)",
)
"""The producers' figures, in the order the soak prints them."""

ADAPTIVE_FIGURES = (
    "runs throttled by the downstream's capacity",
    "limit written by a tick",
    "cuts (each by its own signal)",
    "scenarios whose limit was cut to its min",
    "scenarios reset by the operator (reset-limit)",
)
"""The adaptive pools' figures, in the order the soak prints them."""

FINISHED = Tally()
"""Every scenario run in this process (the test session prints it)."""

WAKE_FIGURES = (
    "wake spared (one went within the second)",
    "wake lost",
    "wake delivered twice",
    "wake refused by its queue (the send went on)",
)
"""The producers' wakes, as `tests.faults.waking` counts them, in the order the soak prints them."""
