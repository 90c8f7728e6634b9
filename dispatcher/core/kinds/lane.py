"""The lane: a FIFO queue whose jobs start executions of one state machine, in one pool."""

from __future__ import annotations

from pydantic import Field, StrictBool, StrictInt

from dispatcher.core.kinds.spec import Kind, Label
from dispatcher.core.outcomes import Outcome
from dispatcher.core.overrides import Override
from dispatcher.core.topology import LANE, Lane


class LaneOverride(Override):
    """A lane's overrides: its MAX and pause, and how it shares its slots among message groups."""

    max_per_group: StrictInt | None = Field(default=None, ge=1)
    """At most this many RUNNING executions of one message group (a JSON boolean is not an integer)."""
    fair_share: StrictBool | None = None
    """Free slots go first to the groups with fewest RUNNING."""
    max_wait_seconds: StrictInt | None = Field(default=None, ge=1)
    """A job received this long after it was sent expires (a JSON boolean is not an integer)."""


LANE_KIND = Kind(
    name=LANE,
    plural="lanes",
    member=Lane,
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
