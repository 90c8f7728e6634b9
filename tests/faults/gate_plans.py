"""A gate's plan in a generated scenario: its kind and caps, its executions' fates, its faults.

Drawn per gated execution: its request doubled (a producer's retry); its release lost,
doubled, late or sent early; its fate (dies waiting, aborted inside, goes on past the
section without a release, or releases as it should). Drawn per gate: a few poison
requests, the operator pausing and resuming it, crashes at its own steps and
`SendTaskSuccess`'s faults. `tests.faults.gates` runs the plan.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.support.crashes import CrashPlan

if TYPE_CHECKING:
    from tests.support.plans import FaultPlan


GATE = "crawl"
GATE_POOL = "api"
"""The pool of a gate of kind ``pool``."""
GATE_SHARE = 0.25
"""Of the scenarios without wide rounds (with a second lane or not)."""
GATE_CRASH_POINTS = (
    ("states.SendTaskSuccess", "before"),
    ("states.SendTaskSuccess", "after"),
    ("dynamodb.BatchWriteItem:record", "after"),
    ("dynamodb.PutItem:confirm", "before"),
    ("dynamodb.PutItem:confirm", "after"),
    ("sqs.DeleteMessageBatch", "before"),
    ("dynamodb.DeleteItem:release", "after"),
)
"""The gate's own steps: around the call, after the admission's record, around its
confirmation, before the request's delete, after a release's delete."""
FATES = ("releases", "releases", "releases", "dies waiting", "aborted inside", "no release")
RELEASES = ("sent", "sent", "lost", "doubled", "late")
GATED_INPUT = json.dumps({"gated": True, "seconds": 1e9})
"""A gated execution ends when the run says (the world would end it after its ``seconds``)."""
SECTION_SECONDS = (0.0, 5.0, 30.0, 90.0)
AFTER_SECONDS = (0.0, 5.0, 30.0)
"""A section and the free part after it end within the quiet phase's settling (181 s, with the lag)."""


@dataclass
class GatedPlan:
    """One gated execution: when it starts and asks, how long its section is, what becomes of it."""

    name: str
    starts: int
    """The tick before which its producer starts it."""
    asks_after: float
    section: float
    after: float
    fate: str
    dies_after: float
    """Seconds after its request (dies waiting) or its admission (aborted inside)."""
    release: str = "sent"
    release_delay: float = 0.0
    doubled_request: float | None = None
    """Seconds after its request that the same request is sent again."""
    early_release: bool = False


@dataclass
class GatePlan:
    """Gate ``crawl``: its pool and MAX, its executions, its poison, the operator's pauses, its crashes."""

    kind: str
    """``shared``: in pool default with the default lane; ``pool``: in a pool of its own."""
    max_concurrency: int | None
    pool_max: int
    executions: list[GatedPlan]
    poison: dict[int, str] = field(default_factory=dict)
    """Tick → a malformed request sent before it."""
    pauses: dict[int, bool] = field(default_factory=dict)
    crashes: dict[int, CrashPlan] = field(default_factory=dict)
    faults: dict[str, float] = field(default_factory=dict)
    """`SendTaskSuccess`'s faults: ``throttle``, ``server_error``, ``lost_response`` → their rate."""

    def add_faults(self, plan: FaultPlan) -> None:
        """Inject the gate's own faults into the scenario's plan (drawn apart, so other draws stay)."""
        for kind, rate in self.faults.items():
            getattr(plan, kind)["SendTaskSuccess"] = rate

    def describe(self) -> str:
        """One line for a failure report."""
        fates = {fate: sum(plan.fate == fate for plan in self.executions) for fate in set(FATES)}
        return (
            f"gate(kind={self.kind} max={self.max_concurrency} pool_max={self.pool_max}"
            f" executions={len(self.executions)} fates={fates} poison={len(self.poison)}"
            f" pauses={self.pauses} crashes={[str(plan) for plan in self.crashes.values()]}"
            f" faults={self.faults})"
        )


def plan_gate(rng: random.Random, fault_ticks: int, *, faults: bool) -> GatePlan | None:
    """Maybe a gate (the caller draws it only for scenarios with no second lane, not wide)."""
    if rng.random() >= GATE_SHARE:
        return None
    executions = [_gated(rng, index, fault_ticks, faults=faults) for index in range(rng.randint(1, 12))]
    pauses: dict[int, bool] = {}
    if rng.random() < 0.3 and fault_ticks > 1:
        paused_at = rng.randrange(fault_ticks - 1)
        pauses = {paused_at: True, rng.randrange(paused_at + 1, fault_ticks): False}
    return GatePlan(
        kind=rng.choice(["shared", "pool"]),
        max_concurrency=rng.choice([None, None, 1, 2]),
        pool_max=rng.choice([1, 2, 3]),
        executions=executions,
        poison={rng.randrange(fault_ticks): "bad" for _ in range(rng.choice([0, 0, 1, 2]))},
        pauses=pauses,
        crashes={
            tick: CrashPlan(*rng.choice(GATE_CRASH_POINTS), nth=rng.randint(1, 2))
            for tick in range(fault_ticks)
            if faults and rng.random() < 0.3
        },
        faults={
            kind: rng.choice([0.1, 0.3, 0.7])
            for kind in ("throttle", "server_error", "lost_response")
            if faults and rng.random() < 0.3
        },
    )


def _gated(rng: random.Random, index: int, fault_ticks: int, *, faults: bool) -> GatedPlan:
    plan = GatedPlan(
        name=f"gated-{index}",
        starts=rng.randrange(fault_ticks),
        asks_after=rng.choice([0.0, 1.0, 10.0]),
        section=rng.choice(SECTION_SECONDS),
        after=rng.choice(AFTER_SECONDS),
        fate=rng.choice(FATES) if faults else "releases",
        dies_after=rng.choice([1.0, 20.0, 100.0]),
    )
    if faults:
        plan.release = rng.choice(RELEASES)
        plan.release_delay = rng.choice([0.0, 2.0, 30.0, 90.0])
        plan.doubled_request = rng.choice([None, None, 0.5, 40.0, 200.0])
        plan.early_release = rng.random() < 0.15
    return plan
