"""The lane's part of `dispatcher status`: each lane's queue and dead letters; its state machines listed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispatcher.adapters.lane_roster import LaneRosterTable
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.kind_status import KindStatus, MemberRow, StatusRead, limit, yes
from dispatcher.cli.output import table
from dispatcher.core.kinds import kind_of
from dispatcher.core.rosters import RosterRead
from dispatcher.core.sizes import pooled_sizes, weight
from dispatcher.core.topology import LANE, Lane, Member, Topology


@dataclass(frozen=True)
class LaneStatus:
    """One lane: its queue and dead letters (and its own MAX, None: its pool's alone)."""

    name: str
    pool: str
    priority: int
    queued: int
    in_flight: int
    dead_letters: int
    paused: bool
    max_concurrency: int | None
    settings: dict[str, Any] = field(default_factory=dict)
    """Each of its settings: the value the ticks use, its source and the configured value."""


def read_lanes(read: StatusRead) -> KindStatus:
    """Every lane, and each state machine's RUNNING executions (what holds its pool's slots)."""
    listings = {
        arn: StateMachine(read.aws.client("stepfunctions"), arn).list_running(None, {}, listed_at=read.now)
        for arn in read.topology.state_machines
    }
    return KindStatus(
        kind_of(LANE),
        tuple(_lane(read, lane) for lane in read.topology.members_of(kind=Lane)),
        {arn: weight(pooled_sizes(read.sizes, arn), listing.executions) for arn, listing in listings.items()},
        lanes_table,
        listings,
        {arn: len(listing.executions) for arn, listing in listings.items()},
    )


def _lane(read: StatusRead, lane: Lane) -> LaneStatus:
    queued, in_flight = read.depth(lane.queue_url)
    dead_letters = sum(read.depth(lane.dead_letter_queue_url))
    return LaneStatus(
        lane.name,
        lane.pool,
        lane.priority,
        queued,
        in_flight,
        dead_letters,
        read.halted(lane),
        lane.max_concurrency,
        read.settings_of(lane),
    )


def lanes_table(lanes: Sequence[MemberRow]) -> str:
    """A row per lane."""
    return table(
        ["LANE", "POOL", "PRIORITY", "MAX", "PAUSED", "QUEUED", "IN FLIGHT", "DEAD LETTERS"],
        [
            [
                lane.name,
                lane.pool,
                str(lane.priority),
                limit(lane.max_concurrency),
                yes(lane.paused),
                str(lane.queued),
                str(lane.in_flight),
                str(lane.dead_letters),
            ]
            for lane in lanes
            if isinstance(lane, LaneStatus)
        ],
    )


def lane_rosters(
    aws: Aws, resources: Resources, topology: Topology, wanted: Callable[[Member], bool]
) -> list[tuple[Member, RosterRead]]:
    """Each wanted lane that counts by group (a group limit, or fair share), with its roster."""
    lanes = [lane for lane in topology.members_of(kind=Lane) if lane.tenants and wanted(lane)]
    if not lanes:
        return []
    roster = LaneRosterTable(
        aws.client("dynamodb"), resources.need("state_table"), topology.default_lane.state_machine_arn
    )
    return [(lane, roster.read(lane)) for lane in lanes]
