"""What the control parameter may say of one pool or member: its MAX, its pause, and its kind's settings.

Each kind of member declares its own override (`Kind.override`, a subclass of `Override`);
`dispatcher.core.control` reads the whole parameter. Pure.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from dispatcher.core.adaptive import AdaptiveDocument


class Override(BaseModel):
    """One pool's or member's overrides (``{"max_concurrency", "paused"}``, each optional)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_concurrency: StrictInt | None = Field(default=None, ge=0)
    """RUNNING executions allowed (a JSON boolean is not an integer)."""
    paused: StrictBool | None = None
    """True: nothing starts and nothing is lost."""


class PoolOverride(Override):
    """A pool's overrides: its MAX and pause, and its adaptive settings (``false``: MAX, not learned)."""

    adaptive: AdaptiveDocument | Literal[False] | None = None
