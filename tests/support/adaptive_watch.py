"""An adaptive pool's limit as the world sees the dispatcher write it, and the three checks on it.

The fault middleware hands the watch every limit item the dispatcher writes (`written`), and the
world asks it at every start in the pool (`check_start`):

- RUNNING never exceeds L at a start (L: the limit last written);
- L stays within [min(min, MAX), MAX];
- a signal's decrease is applied at most once: each cut names the run whose throttle
  caused it (execution and stop time), which truly failed with an error in ``errors``,
  and no run causes two cuts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatcher.adapters.limit_items import LIMIT_PREFIX, read_limit
from dispatcher.core.adaptive import Adaptive, bounds
from tests.support.runs import Execution

STOP_TOLERANCE_SECONDS = 1e-3
"""The item keeps a stop time to the microsecond; the event to the millisecond."""


@dataclass
class AdaptiveWatch:
    """One adaptive pool: its members' state machines, its MAX and settings, and L as written."""

    pool: str
    machines: frozenset[str]
    max_concurrency: int
    settings: Adaptive
    executions: Callable[[str], list[Execution]]
    """The executions called by a name (of any state machine)."""
    inside: Callable[[], int] = lambda: 0
    """Who is inside the pool's gates now."""
    limit: int | None = None
    """L as the dispatcher last wrote it (None: not yet: it is MAX)."""
    cut: tuple[str, float] | None = None
    cuts: Counter[tuple[str, float]] = field(default_factory=Counter)
    """(execution, stop time) of each signal → the cuts it caused."""
    writes: int = 0
    lowest: int | None = None
    checking: bool = True
    """Whether starts are checked against L (not once the operator has turned adaptive off: L is MAX then)."""

    def check_start(
        self, machine: str, counted: Callable[[frozenset[str]], int], what: str, started_slots: int = 1
    ) -> list[str]:
        """RUNNING (in slots) against L at a start in the pool (before the first write L is MAX: the pool's).

        A job larger than L may start alone: then the pool runs it and nothing else.
        """
        if not self.checking or machine not in self.machines or self.limit is None:
            return []
        running = counted(self.machines) + self.inside()
        if running > self.limit and not (started_slots > self.limit and running == started_slots):
            return [f"adaptive: {running} RUNNING > limit {self.limit} in pool {self.pool} after {what}"]
        return []

    def written(self, item: Mapping[str, Any]) -> list[str]:
        """A limit item the dispatcher wrote: within bounds, and a cut by a signal no earlier cut was by."""
        if not str(item.get("sk", {}).get("S", "")).startswith(LIMIT_PREFIX):
            return []
        pool, state = read_limit(item)
        if pool != self.pool:
            return []
        self.writes += 1
        violations = []
        low, high = bounds(self.settings, self.max_concurrency)
        if not low <= state.limit <= high:
            violations.append(f"adaptive: pool {pool}'s limit {state.limit} outside [{low}, {high}]")
        cut = (
            None
            if state.cut_execution is None or state.cut_by is None
            else (state.cut_execution, state.cut_by)
        )
        if cut is not None and cut != self.cut:
            self.cuts[cut] += 1
            if self.cuts[cut] > 1:
                violations.append(
                    f"adaptive: the signal of {cut[0]} (ended {cut[1]}) cut pool {pool}'s limit twice"
                )
            if not self._throttled(*cut):
                violations.append(
                    f"adaptive: pool {pool}'s limit cut by {cut[0]}, which ended with no signal then"
                )
        self.limit, self.cut = state.limit, cut
        self.lowest = state.limit if self.lowest is None else min(self.lowest, state.limit)
        return violations

    def _throttled(self, name: str, stopped_at: float) -> bool:
        """Whether a run of ``name`` ended at ``stopped_at`` with an error that is a signal."""
        return any(
            run.ended_at is not None
            and abs(run.ended_at - stopped_at) <= STOP_TOLERANCE_SECONDS
            and run.error in self.settings.errors
            for execution in self.executions(name)
            for run in execution.runs
        )
