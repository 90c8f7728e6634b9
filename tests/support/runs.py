"""An execution as a test world knows it: its runs, the messages in flight, its status change event."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from dispatcher.core.executions import REDRIVABLE_STATUSES, state_machine_of
from dispatcher.local.events import status_change_event

OUTAGE_ERROR = "Job.Failed"
"""A run that called the downstream API during the outage fails with this."""
THROTTLE_ERROR = "Downstream.Throttled"
"""A run started while the downstream API ran at its capacity fails with this (`World.capacity`)."""
THROTTLED_AFTER_SECONDS = 1.0
"""How long such a run takes to fail (`World.throttle_after_seconds`)."""


@dataclass
class Run:
    """One run of an execution: its start, and a redrive is another run of the same execution."""

    started_at: float
    planned_end: float
    appear_after: float
    vanish_after: float
    ended_at: float | None = None
    status: str = "SUCCEEDED"
    """How this run ended (FAILED when it called the downstream API during the outage)."""
    throttled: str | None = None
    """Started while the downstream API ran at its capacity: the error it fails with (`World.capacity`)."""

    @property
    def error(self) -> str | None:
        """The error a failed run ended with (None: it didn't fail)."""
        if self.status not in REDRIVABLE_STATUSES:
            return None
        return self.throttled or OUTAGE_ERROR

    def running_at(self, moment: float) -> bool:
        """Whether this run was RUNNING at ``moment``."""
        return self.started_at <= moment and (self.ended_at is None or self.ended_at > moment)


@dataclass
class Execution:
    """One execution as the ground truth knows it, on the virtual clock."""

    arn: str
    name: str
    input: str
    sequence: int
    by_dispatcher: bool
    describe_after: float
    runs: list[Run]
    slots: int = 1
    """How many of its pool's slots it takes (its job's size; the input says so, `planned_slots`)."""

    @property
    def started_at(self) -> float:
        """When the execution was first started."""
        return self.runs[0].started_at

    @property
    def ended_at(self) -> float | None:
        """When its latest run ended (None while it runs)."""
        return self.runs[-1].ended_at

    @property
    def redriven_at(self) -> float | None:
        """When it was last redriven, if ever."""
        return self.runs[-1].started_at if len(self.runs) > 1 else None

    def running_at(self, moment: float) -> bool:
        """Whether the execution was RUNNING at ``moment``."""
        return any(run.running_at(moment) for run in self.runs)


@dataclass(order=True)
class Delivery:
    """A status change event EventBridge will deliver at ``at``."""

    at: float
    sequence: int
    event: dict[str, Any] = field(compare=False)


@dataclass
class InFlight:
    """A message the dispatcher received and has neither deleted nor released."""

    receipt_handle: str
    visible_at: float


@dataclass
class GroupCaps:
    """Each lane's limit per message group, and whose group each execution is."""

    limits: dict[str, int] = field(default_factory=dict)
    """Lane → its ``max_per_group``."""
    of: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Execution name → (the lane that starts it, its message group)."""


def execution_event(
    execution: Execution, status: str, state_machine_arn: str | None = None
) -> dict[str, Any]:
    """The status change event of ``execution``'s latest run, as EventBridge delivers it."""
    run = execution.runs[-1]
    failed = status in REDRIVABLE_STATUSES
    return status_change_event(
        execution_arn=execution.arn,
        state_machine_arn=state_machine_arn or state_machine_of(execution.arn),
        name=execution.name,
        status=status,
        started_at=execution.started_at,
        stopped_at=None if status == "RUNNING" else run.ended_at,
        execution_input=execution.input,
        error=run.error if failed else None,
        cause="planned by the scenario" if failed else None,
        redrive_count=len(execution.runs) - 1,
        redriven_at=execution.redriven_at,
        event_id=f"event-{execution.sequence}-{len(execution.runs)}-{status}",
    )


@functools.lru_cache(maxsize=1 << 16)
def calls_downstream(execution_input: str) -> bool:
    """Whether the job calls the downstream API (so fails during an outage)."""
    try:
        document = json.loads(execution_input)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("downstream") is True


def planned_seconds(execution_input: str) -> float:
    """How long the job says its run takes (0: it doesn't say)."""
    try:
        document = json.loads(execution_input)
    except ValueError:
        return 0.0
    seconds = document.get("seconds", 0.0) if isinstance(document, dict) else 0.0
    return float(seconds) if isinstance(seconds, int | float) else 0.0


def planned_slots(execution_input: str) -> int:
    """How many slots the job says it takes (its ``Slots``, repeated in its input; 1: it doesn't say)."""
    try:
        document = json.loads(execution_input)
    except ValueError:
        return 1
    slots = document.get("slots", 1) if isinstance(document, dict) else 1
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 1 else 1
