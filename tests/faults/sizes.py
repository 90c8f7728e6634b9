"""A scenario's job sizes (`Slots`): some of lane default's valid jobs take several slots, some can't fit.

A sized job's ``Slots`` is repeated in its input (``"slots"``), so the world weighs each
execution it sees started (`tests.support.runs.planned_slots`) and checks its pool's sum of
sizes against MAX (and an adaptive L, save a lone large job) at every start. Sizes stay
within every limit lane default's jobs meet (its pool's MAX, its ``max_per_group``), so
each such job must start; a few more jobs are larger than any MAX the scenario can have
(`TOO_LARGE`) and must be dead-lettered ``too large:``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from dispatcher.core.messages import SLOTS_ATTRIBUTE
from tests.faults.jobs import Job

SIZED_SHARE = 0.3
"""Scenarios whose jobs have sizes."""
LARGE_SHARE = 0.35
"""Of a sized scenario's valid jobs, those that take more than one slot."""
TOO_LARGE = "too many slots"
"""The poison kind of a job larger than its pool can ever hold."""


@dataclass(frozen=True)
class SizePlan:
    """What sizes a scenario drew."""

    sized: int
    """Valid jobs of more than one slot (their repeats not counted)."""
    largest: int
    too_large: int
    """Jobs larger than any MAX: dead-lettered ``too large:``."""

    def describe(self) -> str:
        """Its part of `Scenario.describe`."""
        return f"sizes(sized={self.sized} largest={self.largest} too_large={self.too_large})"


def plan_sizes(
    rng: random.Random, jobs: list[Job], limit: int, never_fits: int, *, second_lane: bool
) -> SizePlan | None:
    """Maybe sizes: lane default's valid jobs of 2..``limit`` slots; jobs of ``never_fits`` slots or more.

    ``limit``: the least of the limits lane default's jobs meet; ``never_fits``: more than any
    MAX the scenario can have. A scenario with a second lane keeps its jobs one slot each.
    """
    if second_lane or rng.random() >= SIZED_SHARE:
        return None
    sizes: dict[str, int] = {}
    if limit >= 2:
        for job in jobs:
            if (
                job.poison is None
                and job.duplicate_of is None
                and job.lane is None
                and rng.random() < LARGE_SHARE
            ):
                sizes[job.key] = rng.randint(2, limit)
    for job in jobs:
        slots = sizes.get(job.key) or sizes.get(job.duplicate_of or "")
        if slots is not None:
            _size(job, slots)
    too_large = rng.choice([0, 0, 1, 2])
    for index in range(too_large):
        key = f"{rng.getrandbits(32):08x}-large{index}"
        job = Job(key, f"large{index}", json.dumps({"job": key}), rng.randrange(2), poison=TOO_LARGE)
        job.attributes[SLOTS_ATTRIBUTE] = {"DataType": "Number", "StringValue": str(never_fits + index)}
        jobs.append(job)
    return SizePlan(len(sizes), max(sizes.values(), default=1), too_large)


def _size(job: Job, slots: int) -> None:
    """Give ``job`` its size: the attribute, and the same in its input for the world."""
    body = json.loads(job.body)
    body["slots"] = slots
    job.body = json.dumps(body)
    job.attributes[SLOTS_ATTRIBUTE] = {"DataType": "Number", "StringValue": str(slots)}
