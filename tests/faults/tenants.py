"""Tenants in generated scenarios: a limit per message group and fair share, on lanes and gates mixed.

A third of the scenarios count by message group somewhere: lane default (``MAX_PER_GROUP``,
``FAIR_SHARE``), the second lane (``max_per_group``, ``fair_share`` in ``LANES``) and the
gate (``max_per_group``, its requests sent in a few tenant groups), each drawn on its
own, with lanes and gates in one pool when the scenario has them there. Some jobs run
for 400 s: longer than every window the dispatcher keeps (the recent starts' 90 s, the
roster's reconciliation). Ticks die where they die in every scenario (around the holds'
`BatchWriteItem` and `ChangeMessageVisibilityBatch` too).

Checked, beside every other invariant: at every start (and redrive) by the dispatcher,
no group has more RUNNING executions started from a member than its limit (the world
counts the truth); at every admission, no group more inside the gate. A held job is
never dead-lettered and keeps its group's order (the end state's checks), and nothing is
left on any queue (a job held for 4 hours would be).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.faults.jobs import Job

TENANT_SHARE = 1 / 3
"""Of the scenarios, those that count by group somewhere."""
LONG_SECONDS = 400.0
"""An execution that outlives every window the dispatcher keeps."""
LONG_SHARE = 0.3
GATE_GROUPS = 2
"""The tenant groups a gate's requests are sent in (else each request is its own group)."""


@dataclass(frozen=True)
class TenantPlan:
    """Who counts by message group in one scenario, and how."""

    default_limit: int | None = None
    default_fair: bool = False
    lane_limit: int | None = None
    lane_fair: bool = False
    gate_limit: int | None = None
    long_jobs: int = 0
    """Valid jobs made to run `LONG_SECONDS`."""

    def environment(self) -> dict[str, str]:
        """Lane default's variables."""
        variables = {"FAIR_SHARE": "true"} if self.default_fair else {}
        if self.default_limit is not None:
            variables["MAX_PER_GROUP"] = str(self.default_limit)
        return variables

    def lane_options(self) -> dict[str, object]:
        """The second lane's keys in ``LANES``."""
        options: dict[str, object] = {"fair_share": True} if self.lane_fair else {}
        if self.lane_limit is not None:
            options["max_per_group"] = self.lane_limit
        return options

    def describe(self) -> str:
        """One line for a failure report."""
        return (
            f"tenants(default={self.default_limit}{'/fair' if self.default_fair else ''}"
            f" lane={self.lane_limit}{'/fair' if self.lane_fair else ''} gate={self.gate_limit}"
            f" long={self.long_jobs})"
        )


def plan_tenants(rng: random.Random, jobs: list[Job], *, lane: bool, gate: bool) -> TenantPlan | None:
    """Maybe a tenant plan: each member counts by group or not; some jobs made long (their bodies change)."""
    if rng.random() >= TENANT_SHARE:
        return None
    plan = TenantPlan(
        default_limit=rng.choice([None, 1, 1, 2, 3]),
        default_fair=rng.random() < 0.5,
        lane_limit=rng.choice([None, 1, 2]) if lane else None,
        lane_fair=lane and rng.random() < 0.5,
        gate_limit=rng.choice([None, 1, 2]) if gate else None,
        long_jobs=_lengthen(rng, jobs),
    )
    if (
        plan.default_limit is None
        and not plan.default_fair
        and plan.lane_limit is None
        and plan.gate_limit is None
    ):
        plan = TenantPlan(default_limit=1, default_fair=plan.default_fair, long_jobs=plan.long_jobs)
    return plan


def _lengthen(rng: random.Random, jobs: list[Job]) -> int:
    """Make some valid jobs run `LONG_SECONDS` (their repeats keep the same input); how many."""
    lengthened: dict[str, str] = {}
    for job in jobs:
        if job.poison is None and job.duplicate_of is None and rng.random() < LONG_SHARE:
            body = json.loads(job.body)
            body["seconds"] = LONG_SECONDS
            job.body = lengthened[job.key] = json.dumps(body)
    for job in jobs:
        if job.duplicate_of in lengthened:
            job.body = lengthened[job.duplicate_of]
    return len(lengthened)


def gate_group(index: int) -> str:
    """The tenant group of a gated execution's request (``index``: its place among the gate's executions)."""
    return f"tenant-{index % GATE_GROUPS}"
