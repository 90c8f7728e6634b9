"""The gate: a section of a workflow that executions enter with a task token, in one pool."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field, StrictInt

from dispatcher.core.counting import Count
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.kinds.spec import Kind, Label, Unit
from dispatcher.core.lanes_document import MemberDocument
from dispatcher.core.outcomes import Outcome
from dispatcher.core.overrides import Override
from dispatcher.core.topology import Lane, Member

GATE = "gate"
"""The gate's kind (`Member.kind`)."""


@dataclass(frozen=True)
class Gate(Member):
    """A section of one state machine's workflow that executions enter with a task token, in one pool.

    Its executions inside the section count in its pool; those waiting at it, or past it,
    count nowhere. It shares its pool's slots with the pool's lanes of priority 0. Its
    queue takes requests (a ``{"token", "execution"}`` each).
    """

    kind: ClassVar[str] = GATE

    @property
    def count_key(self) -> str:
        """Its own roster: the executions inside its section (its state machine's others count nowhere)."""
        return f"gate:{self.name}"


class GateDocument(MemberDocument):
    """``gates[i]``: a section of a workflow that executions enter with a task token."""

    max_concurrency: StrictInt | None = Field(default=None, ge=0)
    max_per_group: StrictInt | None = Field(default=None, ge=1)


class GateOverride(Override):
    """A gate's overrides: its MAX and pause, and its limit per message group."""

    max_per_group: StrictInt | None = Field(default=None, ge=1)


def _check(members: Sequence[Member]) -> None:
    """A state machine can't be both a lane's and a gate's in one pool.

    A lane counts every RUNNING execution of its state machine, those waiting at the gate
    too: the gate's executions would hold its pool's slots twice, and the waiting ones
    would hold slots they wait for.
    """
    lanes = [member for member in members if isinstance(member, Lane)]
    gates = [member for member in members if isinstance(member, Gate)]
    for index, gate in enumerate(gates):
        for lane_index, lane in enumerate(lanes):
            if lane.state_machine_arn == gate.state_machine_arn and lane.pool == gate.pool:
                owner = "the environment's lane" if lane_index == 0 else f"lanes[{lane_index - 1}]"
                raise ConfigurationError(
                    f"LANES: gates[{index}].state_machine_arn: it is {owner}'s state machine too, in pool"
                    f" {gate.pool!r}: a state machine can't be both a lane's and a gate's in one pool"
                )


def _inside(count: Count) -> dict[str, Any]:
    """Who is inside, for how long: a gate's entry in the return value."""
    return {"inside": count.running, "oldest_inside_seconds": count.oldest_seconds}


def _inside_metric(count: Count) -> dict[str, float]:
    return {"Inside": count.running}


def _oldest_inside(counts: Sequence[Count]) -> dict[str, tuple[float, Unit]]:
    """The longest anyone has been inside any gate (the alarm's), 0 when nobody is."""
    ages = [count.oldest_seconds for count in counts if count.oldest_seconds is not None]
    return {"OldestInsideAge": (max(ages, default=0.0), "Seconds")}


GATE_KIND = Kind(
    name=GATE,
    plural="gates",
    member=Gate,
    document=GateDocument,
    check=_check,
    labels={
        Outcome.STARTED: Label("admitted", "admitted", "Admitted", "Admitted"),
        Outcome.ALREADY: Label("already_inside", "already inside", within=Outcome.STARTED),
        Outcome.REFUSED: Label(
            "refused", "refused", "TokensRefused", "TokensRefused", within=Outcome.STARTED
        ),
        Outcome.DEAD_LETTERED: Label("dead_lettered", "dead-lettered", "DeadLettered", "DeadLettered"),
        Outcome.WAITING: Label("released", "released", "Released"),
        Outcome.DELETE_FAILED: Label("delete_failures", "delete failures", "DeleteFailures"),
    },
    dimension="Gate",
    settings=("max_per_group",),
    override=GateOverride,
    entry=_inside,
    metrics=_inside_metric,
    totals=_oldest_inside,
)
"""A gate's one setting: its limit per message group."""
