"""Values that cross the boundary between the AWS adapters and the planning core."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt


class QueuedMessage(BaseModel):
    """One job received from the source FIFO queue."""

    model_config = ConfigDict(frozen=True)

    message_id: str
    receipt_handle: str
    body: str
    group_id: str
    execution_name: str | None = Field(
        default=None, description="The optional `ExecutionName` String attribute."
    )
    execution_name_type: str | None = Field(
        default=None, description="DataType of the `ExecutionName` attribute, when present."
    )
    receive_count: int = 1
    sent_at: float | None = Field(
        default=None, description="When SQS received the message (its SentTimestamp), epoch seconds."
    )
    attributes: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Message attributes as SQS returned them, copied to the DLQ.",
    )


class RecordedStart(BaseModel):
    """A start the dispatcher recorded in the state table just before `StartExecution`."""

    model_config = ConfigDict(frozen=True)

    name: str
    recorded_at: float
    sort_key: str
    group: str | None = Field(default=None, description="The job's message group (for a restart).")
    redrive_count: int | None = Field(
        default=None, description="For a redrive: the execution's redriveCount before it (None for a start)."
    )


class EndedExecution(BaseModel):
    """An execution a "Step Functions Execution Status Change" event says has ended."""

    model_config = ConfigDict(frozen=True)

    name: str
    stopped_at: float = Field(description="The event's stopDate, in epoch seconds (Step Functions' clock).")


class StateWindow(BaseModel):
    """What the state table holds for the review window: recent starts and ended executions."""

    model_config = ConfigDict(frozen=True)

    starts: tuple[RecordedStart, ...] = ()
    ended: tuple[EndedExecution, ...] = ()


class RunningListing(BaseModel):
    """What `ListExecutions(statusFilter=RUNNING)` showed, and when it was asked."""

    model_config = ConfigDict(frozen=True)

    executions: dict[str, float | None] = Field(
        description="Name → redriveDate (epoch seconds) of each listed execution, None if never redriven."
    )
    complete: bool = Field(description="False when paging stopped early because MAX was reached.")
    listed_at: float = Field(description="The dispatcher's clock just before the first page was asked for.")
    oldest_started_at: float | None = Field(
        default=None, description="The earliest startDate among the listed executions (epoch seconds)."
    )


class StatusChangeDetail(BaseModel):
    """The `detail` of a "Step Functions Execution Status Change" event (the fields used)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    state_machine_arn: str = Field(alias="stateMachineArn")
    name: str
    status: str
    stop_date: StrictInt | StrictFloat | None = Field(default=None, alias="stopDate")
    """Epoch milliseconds; absent or null while the execution runs."""


class StatusChangeEvent(BaseModel):
    """A "Step Functions Execution Status Change" event as EventBridge delivers it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    detail_type: str = Field(alias="detail-type", pattern="^Step Functions Execution Status Change$")
    time: datetime | None = None
    detail: StatusChangeDetail
