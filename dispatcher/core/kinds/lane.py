"""The lane: a FIFO queue whose jobs start executions of one state machine, in one pool."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field, StrictBool, StrictInt

from dispatcher.core.errors import ConfigurationError
from dispatcher.core.kinds.spec import Kind, Label
from dispatcher.core.lanes_document import LaneDocument
from dispatcher.core.outcomes import Outcome
from dispatcher.core.overrides import Override
from dispatcher.core.topology import LANE, Lane, Member


class LaneOverride(Override):
    """A lane's overrides: its MAX and pause, and how it shares its slots among message groups."""

    max_per_group: StrictInt | None = Field(default=None, ge=1)
    """At most this many RUNNING executions of one message group (a JSON boolean is not an integer)."""
    fair_share: StrictBool | None = None
    """Free slots go first to the groups with fewest RUNNING."""
    max_wait_seconds: StrictInt | None = Field(default=None, ge=1)
    """A job received this long after it was sent expires (a JSON boolean is not an integer)."""


def _check(members: Sequence[Member]) -> None:
    """A state machine counts in one pool, and a lane's own MAX needs a state machine of its own."""
    lanes = [member for member in members if isinstance(member, Lane)]
    first: dict[str, int] = {}
    for index, lane in enumerate(lanes):
        where = f"lanes[{index - 1}]"
        owner = first.setdefault(lane.state_machine_arn, index)
        if owner == index:
            continue
        other = lanes[owner]
        other_name = "the environment's lane" if owner == 0 else f"lanes[{owner - 1}]"
        if other.pool != lane.pool:
            raise ConfigurationError(
                f"LANES: {where}.pool: its state machine is {other_name}'s too, in pool {other.pool!r}:"
                " lanes that start one state machine must name the same pool"
            )
    for index, lane in enumerate(lanes[1:]):
        shared = sum(1 for other in lanes if other.state_machine_arn == lane.state_machine_arn) > 1
        if lane.max_concurrency is not None and shared:
            raise ConfigurationError(
                f"LANES: lanes[{index}].max_concurrency: another lane starts the same state machine,"
                " so this lane's RUNNING can't be told apart (use a pool, or a state machine of its own)"
            )


LANE_KIND = Kind(
    name=LANE,
    plural="lanes",
    member=Lane,
    document=LaneDocument,
    check=_check,
    labels={
        Outcome.STARTED: Label("started", "started", "Started", "Started"),
        Outcome.REDRIVEN: Label("redriven", "redriven", "Redriven", within=Outcome.STARTED),
        Outcome.ALREADY: Label("already_started", "already started", "AlreadyStarted"),
        Outcome.DEAD_LETTERED: Label("dead_lettered", "dead-lettered", "DeadLettered", "DeadLettered"),
        Outcome.CANCELLED: Label("cancelled", "cancelled", "CancelledJobs", quiet=True),
        Outcome.EXPIRED: Label("expired", "expired", "ExpiredJobs", quiet=True),
        Outcome.WAITING: Label("released", "released", "Released", "Released"),
        Outcome.DELETE_FAILED: Label("delete_failures", "delete failures", "DeleteFailures"),
    },
    dimension="Lane",
    settings=("max_per_group", "fair_share", "max_wait_seconds"),
    override=LaneOverride,
    primary=True,
)
"""A lane's settings: how it shares its slots among message groups, and how long a job may wait."""
