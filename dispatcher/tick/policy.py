"""The limits one invocation works within."""

from __future__ import annotations

from dataclasses import dataclass

from dispatcher.core.topology import Topology


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
