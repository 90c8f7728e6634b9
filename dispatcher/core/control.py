"""Live control: the limit and the pause switch an operator changes without a deploy.

The control parameter is an SSM String parameter holding JSON such as
``{"max_concurrency": 8, "paused": false}``; each key is optional and overrides the
function's environment. Parsing is pure, so the same rules serve the dispatcher (which
reads it on every tick) and the CLI (which reads, modifies and writes it).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from dispatcher.core.errors import ConfigurationError, problems

CONTROL_MAX_AGE_SECONDS = 5
"""How long a read of the parameter is reused (Powertools' own default would be 300 s)."""


class Control(BaseModel):
    """The operator's overrides; a key left out keeps the environment's value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_concurrency: StrictInt | None = Field(default=None, ge=0)
    """RUNNING executions allowed (a JSON boolean is not an integer)."""
    paused: StrictBool | None = None
    """True: nothing starts and nothing is lost."""

    def as_json(self) -> str:
        """The parameter's value: only the keys that are set, in a stable order."""
        return json.dumps(self.model_dump(exclude_none=True), sort_keys=True)


class Limits(BaseModel):
    """What one tick works within, once the parameter and the environment are combined."""

    model_config = ConfigDict(frozen=True)

    max_concurrency: int
    paused: bool
    source: str
    """Where MAX came from: "environment" or the parameter's name."""

    @property
    def halted(self) -> bool:
        """Nothing may start: paused, or MAX is 0."""
        return self.paused or self.max_concurrency == 0


def parse_control(name: str, value: str) -> Control:
    """The parameter's value as a ``Control``; a ``ConfigurationError`` naming ``name`` if it is malformed."""
    try:
        document: Any = json.loads(value)
    except ValueError as error:
        raise ConfigurationError(f"control parameter {name} is not JSON: {error}") from error
    if not isinstance(document, dict):
        raise ConfigurationError(
            f'control parameter {name} must be a JSON object like {{"max_concurrency": 5, "paused": false}}'
        )
    try:
        return Control.model_validate(document)
    except ValidationError as error:
        found = problems(error, lambda field: field or "value")
        raise ConfigurationError(f"control parameter {name} is malformed: {found}") from error


def combine(environment_max: int, control: Control | None, name: str | None) -> Limits:
    """The limits of a tick: the parameter's keys where set, the environment's MAX otherwise."""
    if control is None or name is None:
        return Limits(max_concurrency=environment_max, paused=False, source="environment")
    return Limits(
        max_concurrency=environment_max if control.max_concurrency is None else control.max_concurrency,
        paused=bool(control.paused),
        source="environment" if control.max_concurrency is None else name,
    )
