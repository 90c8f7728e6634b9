"""The gate: a section of a workflow that executions enter with a task token, in one pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field, StrictInt

from dispatcher.core.counting import Count
from dispatcher.core.kinds.spec import Kind, Label, Unit
from dispatcher.core.outcomes import Outcome
from dispatcher.core.overrides import Override
from dispatcher.core.topology import GATE, Gate


class GateOverride(Override):
    """A gate's overrides: its MAX and pause, and its limit per message group."""

    max_per_group: StrictInt | None = Field(default=None, ge=1)


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
