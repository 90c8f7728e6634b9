"""The "Step Functions Execution Status Change" event: its name, its model, and what it tells.

The refill rule (every end of an execution) and the failure spool's rule (every failure)
match these events; the template spells the same patterns in YAML, and a test holds the
two to each other.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from dispatcher.core.executions import CLOSED_ORDER, CLOSED_STATUSES, REDRIVABLE_STATUSES, name_problem

STATUS_CHANGE = "Step Functions Execution Status Change"
"""The event's ``detail-type``."""
EVENT_SOURCE = "aws.states"


class EndedExecution(BaseModel):
    """An execution a status change event says has ended."""

    model_config = ConfigDict(frozen=True)

    name: str
    stopped_at: float = Field(description="The event's stopDate, in epoch seconds (Step Functions' clock).")


class StatusChangeDetail(BaseModel):
    """The `detail` of a status change event (the fields the tick uses)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    state_machine_arn: str = Field(alias="stateMachineArn")
    name: str
    status: str
    stop_date: StrictInt | StrictFloat | None = Field(default=None, alias="stopDate")
    """Epoch milliseconds; absent or null while the execution runs."""


class StatusChangeEvent(BaseModel):
    """A status change event as EventBridge delivers it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    detail_type: str = Field(alias="detail-type", pattern=f"^{STATUS_CHANGE}$")
    time: datetime | None = None
    detail: StatusChangeDetail


def ended_execution(event: object, state_machine_arn: str) -> EndedExecution | None:
    """The execution a status change event says has ended, or None for any other event.

    Only a status change of ``state_machine_arn`` with a closed status counts; anything
    else (another state machine, RUNNING, a malformed event) is an ordinary tick. The
    stop time is ``detail.stopDate``, else the event's ``time``; an event with neither is
    ignored, because without it a redrive after the stop could not be told apart.
    """
    try:
        change = StatusChangeEvent.model_validate(event)
    except ValidationError:
        return None
    detail = change.detail
    if detail.state_machine_arn != state_machine_arn or detail.status not in CLOSED_STATUSES:
        return None
    if name_problem(detail.name) is not None:
        return None
    if detail.stop_date is not None:
        stopped_at = detail.stop_date / 1000
    elif change.time is not None:
        stopped_at = change.time.timestamp()
    else:
        return None
    return EndedExecution(name=detail.name, stopped_at=stopped_at)


def describe_trigger(event: object) -> str:
    """A short label for what invoked the tick; unknown shapes are still a tick."""
    if isinstance(event, dict):
        detail_type = event.get("detail-type")
        if isinstance(detail_type, str):
            return detail_type
        return "manual or EventBridge Scheduler"
    return f"unrecognised event of type {type(event).__name__}"


def _pattern(state_machine_arn: str, statuses: frozenset[str]) -> dict[str, Any]:
    return {
        "source": [EVENT_SOURCE],
        "detail-type": [STATUS_CHANGE],
        "detail": {
            "stateMachineArn": [state_machine_arn],
            "status": [status for status in CLOSED_ORDER if status in statuses],
        },
    }


def refill_pattern(state_machine_arn: str) -> dict[str, Any]:
    """The refill rule's event pattern (the template's `Completion` event): every end."""
    return _pattern(state_machine_arn, CLOSED_STATUSES)


def failure_pattern(state_machine_arn: str) -> dict[str, Any]:
    """The failure spool rule's event pattern (the template's `FailureSpoolRule`): every failure."""
    return _pattern(state_machine_arn, REDRIVABLE_STATUSES)
