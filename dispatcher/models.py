"""Values that cross the boundary between the AWS adapters and the planning core."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


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


class ListedRunning(BaseModel):
    """What `ListExecutions(statusFilter=RUNNING)` showed this tick."""

    model_config = ConfigDict(frozen=True)

    count: int
    names: frozenset[str]
    complete: bool = Field(description="False when paging stopped early at MAX.")
