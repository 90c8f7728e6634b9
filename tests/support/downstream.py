"""A downstream API of limited capacity in the test world: a run started while it is full fails soon.

`World` mixes it in: the fault harness gives it a small capacity (`tests.faults.adaptive`),
the benchmark a changing one (section 14). A run of a job that calls the API (its input
says ``{"downstream": true}``) started while ``capacity`` others use it is turned away: it
fails ``throttle_after_seconds`` later with ``throttle_error``, an adaptive pool's signal.
"""

from __future__ import annotations

from collections import Counter

from tests.support.runs import THROTTLE_ERROR, THROTTLED_AFTER_SECONDS, Execution, calls_downstream


class DownstreamCapacity:
    """The capacity, and who it turns away (the world's open executions and fault counts are its)."""

    _open: dict[str, Execution]
    injected: Counter[str]
    capacity: int | None = None
    """Runs of downstream-calling jobs started while this many of them run fail (None: no capacity)."""
    throttle_error: str = THROTTLE_ERROR
    throttle_after_seconds: float = THROTTLED_AFTER_SECONDS
    """What such a run fails with, and how long after its start."""

    def _throttle(self, execution: Execution) -> None:
        """A run of a job calling the downstream API, started while it runs at its capacity, fails soon."""
        if self.capacity is None or not calls_downstream(execution.input):
            return
        if self.calling_downstream() >= self.capacity:
            run = execution.runs[-1]
            run.throttled = self.throttle_error
            run.planned_end = min(run.planned_end, run.started_at + self.throttle_after_seconds)
            self.injected["run throttled by the downstream API"] += 1

    def calling_downstream(self) -> int:
        """Runs the downstream API serves now: open, calling it, not turned away (throttled)."""
        return sum(
            1
            for other in self._open.values()
            if not other.runs[-1].throttled and calls_downstream(other.input)
        )
