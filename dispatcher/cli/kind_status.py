"""A kind's part of `dispatcher status`: its members' rows and table, what they hold of their pools, rosters.

Each kind registers one `CliKind` in `dispatcher.cli.status_kinds`: `status` (and ``status
--groups``) asks every kind in turn, and never "is it a gate?".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from dispatcher.adapters.sqs import queue_depth
from dispatcher.cli.config import Aws, Resources
from dispatcher.core.counting import RunningListing
from dispatcher.core.kinds import Kind
from dispatcher.core.rosters import RosterRead
from dispatcher.core.sizes import SizeEntry
from dispatcher.core.topology import Member, Topology


class MemberRow(Protocol):
    """One member's entry in `status` (a dataclass: ``--json`` shows its fields, in order)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def name(self) -> str:
        """The member's name."""
        ...

    @property
    def pool(self) -> str:
        """The pool it counts in."""
        ...

    @property
    def settings(self) -> dict[str, Any]:
        """Each of its settings that is set anywhere: the value the ticks use, its source, the configured."""
        ...


@dataclass(frozen=True)
class KindStatus:
    """One kind's members as `status` found them."""

    kind: Kind
    members: tuple[MemberRow, ...]
    counts: Mapping[str, int]
    """Count key (`Member.count_key`) → what holds a slot under it: its pool's RUNNING is their sum."""
    table: Callable[[Sequence[MemberRow]], str]
    """Its rows as a table (``LANE  POOL  …``)."""
    listings: Mapping[str, RunningListing] = field(default_factory=dict)
    """State machine ARN → the listing of its RUNNING executions it read (a lane's)."""
    executions: Mapping[str, int] = field(default_factory=dict)
    """Count key → how many executions hold its ``counts`` slots (absent: one slot each)."""

    def of_pool(self, pool: str) -> tuple[MemberRow, ...]:
        """Its members that count in ``pool``."""
        return tuple(member for member in self.members if member.pool == pool)


@dataclass(frozen=True)
class StatusRead:
    """What every kind's reader works with: AWS, the deployment, the steered members, their settings."""

    aws: Aws
    resources: Resources
    topology: Topology
    shown: Mapping[tuple[str, str, str], dict[str, Any]]
    """(kind, member, key) → the setting as shown (`Setting.as_json`)."""
    now: float
    sizes: Mapping[str, Mapping[str, SizeEntry]] = field(default_factory=dict)
    """Each pool's sized executions as the state table keeps them (`dispatcher.core.sizes`)."""

    def settings_of(self, member: Member) -> dict[str, Any]:
        """The settings of ``member`` that are set anywhere."""
        return {
            key: value
            for (kind, name, key), value in self.shown.items()
            if (kind, name) == (member.kind, member.name)
        }

    def halted(self, member: Member) -> bool:
        """Whether nothing of it starts: paused, MAX 0 (it reads as paused everywhere), or its pool halted."""
        own = member.paused or member.max_concurrency == 0
        return own or self.topology.pool(member.pool).halted

    def depth(self, url: str) -> tuple[int, int]:
        """A queue's visible and in-flight messages."""
        depth = queue_depth(self.aws.client("sqs"), url)
        return depth.visible, depth.in_flight


Rosters = Callable[[Aws, Resources, Topology, Callable[[Member], bool]], list[tuple[Member, RosterRead]]]
"""A kind's members that count by message group (those ``wanted``), each with its roster as read."""


@dataclass(frozen=True)
class CliKind:
    """One kind's registration in the CLI: its part of `status`, and its rosters (`status --groups`)."""

    status: Callable[[StatusRead], KindStatus]
    rosters: Rosters


def yes(flag: bool) -> str:
    """A flag as a cell."""
    return "yes" if flag else "no"


def limit(value: int | None) -> str:
    """A member's own MAX as a cell (``-``: its pool's alone)."""
    return "-" if value is None else str(value)
