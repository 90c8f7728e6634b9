"""The lane: a FIFO queue whose jobs start executions of one state machine, in one pool."""

from __future__ import annotations

from dispatcher.core.control import LaneOverride
from dispatcher.core.kinds.spec import Kind, Label
from dispatcher.core.outcomes import Outcome
from dispatcher.core.topology import LANE, Lane

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
