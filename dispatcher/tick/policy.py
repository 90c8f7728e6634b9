"""The limits one invocation works within."""

from __future__ import annotations

from dataclasses import dataclass

from dispatcher.core.topology import Topology
from dispatcher.tick.ports import Runtime
from dispatcher.tick.report import WAITING_STOPS, StopReason

LOOP_INTERVAL_SECONDS = 1.0


@dataclass(frozen=True)
class TickPolicy:
    """The limits one invocation works within (from the settings and the control parameter)."""

    topology: Topology
    """Every pool, lane and gate with its live limits (pool ``default`` is the environment's)."""
    time_margin_seconds: float = 10.0
    """Stop admitting when less Lambda time than this remains (one round of starts)."""
    start_concurrency: int = 0
    """Message groups started at once; 0 sizes it from the `StartExecution` quota and latency."""
    list_reuse_seconds: float = 1.0
    """A `ListExecutions` read is reused by later ticks of a warm container for this long."""
    loop_seconds: float = 0.0
    """Keep ticking for up to this long while jobs wait for slots; 0 is one tick."""

    @property
    def interval(self) -> float:
        """Between an invocation's ticks: a second, or the listing's reuse if longer."""
        return max(LOOP_INTERVAL_SECONDS, self.list_reuse_seconds)

    def next_tick_in(
        self, stopped: StopReason | None, began: float, runtime: Runtime, wake_until: float | None
    ) -> float | None:
        """Seconds until the invocation whose ticks began at ``began`` ticks again (None: it is done).

        With a loop policy, every `interval` while jobs wait for slots. A tick that a
        wake brought and that found the queues empty, slots free, before ``wake_until``
        (the newest wake's second) ticks once more when that second has passed: its
        producer sent no wake for what it queued within it. Either only while a tick
        then still leaves the invocation its time margin.
        """
        now = runtime.clock()
        wait = None
        if stopped in WAITING_STOPS and now - began + self.interval < self.loop_seconds:
            wait = self.interval
        elif stopped is StopReason.DRAINED and wake_until is not None and now < wake_until:
            wait = wake_until - now
        if wait is None or runtime.remaining_seconds() - wait <= self.time_margin_seconds:
            return None
        return wait
