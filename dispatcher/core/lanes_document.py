"""``LANES``' parts as pydantic models: fields, types and bounds (`dispatcher.core.lanes` reads it).

A field's problem is reported with its location (``LANES: lanes[1].queue_url: field required``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

from dispatcher.core.adaptive import AdaptiveDocument

DEFAULT = "default"
"""The environment's lane and pool."""
NAME_PATTERN = r"^[A-Za-z0-9_-]{1,40}$"
STATE_MACHINE_ARN_PATTERN = r"^arn:aws[\w-]*:states:[\w-]+:\d{12}:stateMachine:[^:]+$"

Name = Annotated[StrictStr, Field(pattern=NAME_PATTERN)]
Url = Annotated[StrictStr, Field(min_length=1)]
StateMachineArn = Annotated[StrictStr, Field(pattern=STATE_MACHINE_ARN_PATTERN)]


class Strict(BaseModel):
    """A document's part: frozen, no unknown keys, and no ``null`` for a key left out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        """``null`` is refused rather than read as "none": a key left out says that, without doubt."""
        if value is None:
            raise ValueError("null is not a value here: leave the key out for none")
        return value


class PoolDocument(Strict):
    """``pools.<name>``: a limit shared by its lanes (and, optionally, learned below it)."""

    max_concurrency: StrictInt = Field(ge=0)
    adaptive: AdaptiveDocument | None = None


class DefaultPoolDocument(Strict):
    """``pools.default``: pool default's MAX is ``MAX_CONCURRENCY``; only ``adaptive`` may be set here."""

    adaptive: AdaptiveDocument | None = None


class MemberDocument(Strict):
    """What every kind of member's entry has first: its name, its queues, its state machine, its pool."""

    name: Name
    queue_url: Url
    dead_letter_queue_url: Url
    state_machine_arn: StateMachineArn
    pool: Name = DEFAULT


class LaneDocument(MemberDocument):
    """``lanes[i]``: a FIFO queue whose jobs start one state machine, counted in one pool."""

    priority: StrictInt = 0
    max_concurrency: StrictInt | None = Field(default=None, ge=0)
    starts_per_second: StrictFloat | None = Field(default=None, gt=0)
    max_per_group: StrictInt | None = Field(default=None, ge=1)
    fair_share: StrictBool = False
    max_wait_seconds: StrictInt | None = Field(default=None, ge=1)
