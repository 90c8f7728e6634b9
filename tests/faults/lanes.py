"""A second lane in generated scenarios: it shares the state machine and pool ``default``.

A quarter of the scenarios that are not wide add lane ``urgent``: some of the jobs go
to its own queue (those no other job refers to: valid jobs named by their MessageId,
and poison that names nobody else), with a priority, sometimes a start rate, and an
operator who pauses and resumes the lane between ticks. The checks are the same, per
lane: the cap of the pool (one state machine, so the world's count), no loss, no
duplicates, order within each lane's groups, poison in its own lane's DLQ.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dispatcher.core.control import Control, Override, parse_control

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tests.faults.scenario import Job

LANE = "urgent"
LANE_SHARE = 0.25
"""Of the scenarios that are not wide."""


@dataclass
class LanePlan:
    """Lane ``urgent``: its priority, its rate, and when the operator pauses (True) or resumes it."""

    priority: int
    starts_per_second: float | None = None
    pauses: dict[int, bool] = field(default_factory=dict)

    def burst(self) -> int:
        """Starts the lane's rate allows at once (its bucket's size)."""
        return math.floor(max(1.0, self.starts_per_second or math.inf))

    def describe(self) -> str:
        """One line for a failure report."""
        return f"lane(priority={self.priority} rate={self.starts_per_second} pauses={self.pauses})"


def plan_lane(rng: random.Random, jobs: Sequence[Job], fault_ticks: int, *, wide: bool) -> LanePlan | None:
    """Maybe a lane, and which jobs go to it (``job.lane`` is set)."""
    if wide or rng.random() >= LANE_SHARE:
        return None
    movable = [
        job
        for job in jobs
        if job.duplicate_of is None
        and ((job.poison is None and job.name is None) or job.poison not in {None, "name collision"})
    ]
    for job in movable:
        if rng.random() < 0.5:
            job.lane = LANE
            job.group = f"{LANE}-{job.group}"
    pauses: dict[int, bool] = {}
    if rng.random() < 0.4 and fault_ticks > 1:
        paused_at = rng.randrange(fault_ticks - 1)
        pauses[paused_at] = True
        pauses[rng.randrange(paused_at + 1, fault_ticks)] = False
    return LanePlan(
        priority=rng.choice([0, 1, 5]),
        starts_per_second=rng.choice([None, None, 0.5, 2.0]),
        pauses=pauses,
    )


def steer_lane(ssm: Any, parameter: str, *, paused: bool) -> None:
    """The operator pauses or resumes the lane (read, modify, write, as `dispatcher pause --lane`).

    ``ssm``: the operator's own client, made before the dispatcher's process hooks the
    default session (a dead dispatcher process must not take the operator with it).
    """
    try:
        current = parse_control(parameter, ssm.get_parameter(Name=parameter)["Parameter"]["Value"])
    except ssm.exceptions.ParameterNotFound:
        current = Control()
    lanes = {**current.lanes, LANE: Override(paused=paused)}
    updated = current.model_copy(update={"lanes": lanes})
    ssm.put_parameter(Name=parameter, Value=updated.as_json(), Type="String", Overwrite=True)


def lanes_variable(lane: dict[str, Any]) -> str:
    """``LANES`` with the one extra lane."""
    return json.dumps({"lanes": [lane]})
