"""What one invocation saw and did: the handler's return value, and why admission stopped."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class StopReason(StrEnum):
    """Why a tick stopped admitting (the report's ``stopped``)."""

    PAUSED = "paused"
    """The operator paused, or MAX is 0: nothing starts, nothing is lost."""
    BUSY = "busy"
    """Another invocation holds the tick lease; it ticks again for this one."""
    CAPACITY = "capacity"
    """Every slot is taken."""
    DRAINED = "drained"
    """The queue had nothing more to hand out."""
    THROTTLED = "throttled"
    """AWS was still throttling (or failing) after retries, or the DLQ refused a message."""
    TIME = "time"
    """Less Lambda time was left than one round needs."""
    WAITING = "waiting"
    """Everything received has to wait (e.g. a redrive job whose execution no read shows yet)."""


WAITING_STOPS = frozenset({StopReason.CAPACITY, StopReason.THROTTLED, StopReason.WAITING})
"""Stops after which jobs may still wait: a looping invocation ticks again (after a pause)."""


@dataclass(kw_only=True)
class TickReport:
    """What one invocation saw and did; its dict is the handler's return value."""

    running: int = 0
    """RUNNING counted before starting (by the first tick)."""
    free: int = 0
    started: int = 0
    """Executions started, and closed executions redriven (they run again)."""
    redriven: int = 0
    """Of ``started``: the redrives."""
    already_started: int = 0
    dead_lettered: int = 0
    released: int = 0
    delete_failures: int = 0
    stopped: StopReason
    """Why admission ended."""
    ticks: int = 1
    oldest_running_seconds: float | None = None
    """Age of the oldest execution the count saw RUNNING (when the listing was complete)."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON-serialisable return value of the handler."""
        return {**asdict(self), "stopped": self.stopped.value}

    def add(self, later: TickReport) -> None:
        """Fold in a later tick of the same invocation."""
        self.started += later.started
        self.redriven += later.redriven
        self.already_started += later.already_started
        self.dead_lettered += later.dead_lettered
        self.released += later.released
        self.delete_failures += later.delete_failures
        self.stopped = later.stopped
        self.ticks += later.ticks
        if later.oldest_running_seconds is not None:
            self.oldest_running_seconds = later.oldest_running_seconds
