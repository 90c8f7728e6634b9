"""An adaptive pool's limit L: cut on a throttle signal, grown back one step at a time (AIMD).

A pool with ``adaptive`` settings learns its downstream's capacity from its workflows' own
throttling failures (DESIGN.md, "Adaptive limit"). L stays within [min(min, MAX), MAX];
the tick uses it in place of MAX. Everything here is pure: the ends arrive as values, time
as ``now`` (epoch seconds), and what L was as a `LimitState` the state table kept.

Each signal is counted once however often it is delivered, without remembering every
execution: a signal cuts L only when it ended more than ``cooldown_seconds`` after the one
that cut it last (so the same signal, delivered again, can't cut twice), and a clean end
counts towards growth only when it ended after every end counted before it (a watermark)
and after L last changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

DEFAULT_MIN, DEFAULT_DECREASE, DEFAULT_COOLDOWN_SECONDS = 1, 0.5, 60.0


class AdaptiveDocument(BaseModel):
    """``pools.<name>.adaptive``: which errors mean "throttled", and how the limit moves."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    errors: list[StrictStr] = Field(min_length=1)
    min: StrictInt = Field(default=DEFAULT_MIN, ge=1)
    decrease: StrictFloat | StrictInt = Field(default=DEFAULT_DECREASE, gt=0, lt=1)
    cooldown_seconds: StrictFloat | StrictInt = Field(default=DEFAULT_COOLDOWN_SECONDS, ge=0)

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        """``null`` is refused rather than read as "the default": leave the key out for that."""
        if value is None:
            raise ValueError("null is not a value here: leave the key out for the default")
        return value

    @field_validator("errors")
    @classmethod
    def _named(cls, errors: list[str]) -> list[str]:
        if any(not error.strip() for error in errors):
            raise ValueError("an error name can't be empty")
        return errors

    def settings(self) -> Adaptive:
        """The validated settings."""
        return Adaptive(
            errors=tuple(dict.fromkeys(self.errors)),
            min=self.min,
            decrease=float(self.decrease),
            cooldown_seconds=float(self.cooldown_seconds),
        )


@dataclass(frozen=True)
class Adaptive:
    """A pool's adaptive settings (`AdaptiveDocument`, validated)."""

    errors: tuple[str, ...]
    """The error names that mean "throttled"."""
    min: int = DEFAULT_MIN
    decrease: float = DEFAULT_DECREASE
    """L becomes floor(L * decrease) on a signal."""
    cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS
    """At most one decrease per this long (the other signals of one overload are ignored)."""

    def as_json(self) -> dict[str, Any]:
        """The settings as the contract spells them (``status --json``)."""
        return {
            "errors": list(self.errors),
            "min": self.min,
            "decrease": self.decrease,
            "cooldown_seconds": self.cooldown_seconds,
        }


def bounds(adaptive: Adaptive, max_concurrency: int) -> tuple[int, int]:
    """The range L stays in: [min(min, MAX), MAX]."""
    return min(adaptive.min, max_concurrency), max_concurrency


@dataclass(frozen=True)
class LimitState:
    """What the state table keeps of one pool's limit (a pool that never adapted has none: L = MAX)."""

    limit: int
    version: int = 0
    """Each write adds one: a write on the condition that the version is unchanged is the only writer."""
    changed_at: float = 0.0
    """When L last changed: an end counts towards growth only if it ended later."""
    cut_by: float | None = None
    """When the signal that cut L last ended (Step Functions' clock): the cooldown runs from there."""
    cut_execution: str | None = None
    """The execution whose signal cut L last (what `status` and the logs name)."""
    clean: int = 0
    """Ends without a signal counted since L last changed."""
    counted_through: float = 0.0
    """The latest end counted: an end that ended no later is not counted again."""
    since: float = 0.0
    """A signal that ended no later is not one: L was reset then (`reset`), and the past forgotten."""


def limit_of(state: LimitState | None, adaptive: Adaptive | None, max_concurrency: int) -> int:
    """L as the tick uses it: MAX when the pool doesn't adapt or never did; else clamped into its bounds."""
    if adaptive is None or state is None:
        return max_concurrency
    low, high = bounds(adaptive, max_concurrency)
    return min(max(state.limit, low), high)


@dataclass(frozen=True)
class PoolEnd:
    """An execution of a pool's member that ended: when, and with which error (None: none told)."""

    name: str
    stopped_at: float
    error: str | None = None


@dataclass(frozen=True)
class Decrease:
    """A cut of L, and the signal that caused it (logged)."""

    execution: str
    error: str
    before: int
    after: int


@dataclass(frozen=True)
class Adaptation:
    """What one tick's ends did to a pool's limit."""

    state: LimitState
    decreases: tuple[Decrease, ...] = ()
    increases: int = 0
    ignored: tuple[str, ...] = ()
    """Signals within the cooldown of the last cut (or before it): counted, but no cut."""
    changed: bool = False
    """Whether the state differs from the one read (it is written)."""


@dataclass
class _Moving:
    """The state while one tick's ends are folded in."""

    state: LimitState
    limit: int
    decreases: list[Decrease] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def adapt(  # noqa: PLR0913 — each is one input of the rule
    state: LimitState | None,
    adaptive: Adaptive,
    *,
    max_concurrency: int,
    ends: Iterable[PoolEnd],
    running: int,
    now: float,
) -> Adaptation:
    """Fold a tick's ends of a pool's executions into its limit (DESIGN.md, "Adaptive limit").

    ``running``: the pool's RUNNING as this tick counted it (growth needs it at least L / 2).
    Ends are taken in the order they ended; the same execution twice counts once.
    """
    first = state or LimitState(limit=max_concurrency, changed_at=now)
    low, high = bounds(adaptive, max_concurrency)
    moving = _Moving(first, min(max(first.limit, low), high))
    latest: dict[str, PoolEnd] = {}
    for end in ends:
        if end.name not in latest or end.stopped_at > latest[end.name].stopped_at:
            latest[end.name] = end
    for end in sorted(latest.values(), key=lambda end: (end.stopped_at, end.name)):
        if end.error is not None and end.error in adaptive.errors:
            _signal(moving, end, adaptive, low)
        else:
            _clean(moving, end)
    increases = _grow(moving, running, high, now)
    final = replace(moving.state, limit=moving.limit)
    changed = state is None or final != state
    if changed:
        final = replace(final, version=first.version + (0 if state is None else 1))
    return Adaptation(final, tuple(moving.decreases), increases, tuple(moving.ignored), changed)


def _signal(moving: _Moving, end: PoolEnd, adaptive: Adaptive, low: int) -> None:
    """A throttle signal: cut L, unless the cooldown of the last cut still runs at its end."""
    state = moving.state
    if end.stopped_at <= state.since:
        return  # before a reset: the operator said to forget it
    if state.cut_by is not None and end.stopped_at <= state.cut_by + adaptive.cooldown_seconds:
        moving.ignored.append(end.name)
        if end.stopped_at > state.changed_at:
            moving.state = replace(state, clean=0)  # the overload goes on: nothing grows yet
        return
    before = moving.limit
    moving.limit = max(low, math.floor(before * adaptive.decrease))
    moving.decreases.append(Decrease(end.name, end.error or "", before, moving.limit))
    moving.state = replace(
        state,
        cut_by=end.stopped_at,
        cut_execution=end.name,
        changed_at=max(state.changed_at, end.stopped_at),
        clean=0,
        counted_through=max(state.counted_through, end.stopped_at),
    )


def _clean(moving: _Moving, end: PoolEnd) -> None:
    """An end without a signal: it counts towards growth once, if it ended after L last changed."""
    state = moving.state
    if end.stopped_at <= state.counted_through:
        return
    moving.state = replace(
        state,
        clean=state.clean + (1 if end.stopped_at > state.changed_at else 0),
        counted_through=end.stopped_at,
    )


def _grow(moving: _Moving, running: int, high: int, now: float) -> int:
    """Additive increase: +1 for every L clean ends, while the pool uses at least half of L."""
    increases = 0
    state = moving.state
    while state.clean >= moving.limit and moving.limit < high and running * 2 >= moving.limit:
        state = replace(state, clean=state.clean - moving.limit, changed_at=now)
        moving.limit += 1
        increases += 1
    # A pool that can't grow (at MAX, or not using L) keeps at most one L's worth: it learns nothing more.
    moving.state = replace(state, clean=min(state.clean, moving.limit))
    return increases


def reset(state: LimitState | None, max_concurrency: int, now: float) -> LimitState:
    """L back to MAX (`dispatcher reset-limit`, or ``adaptive`` turned off): every signal so far forgotten."""
    version = 0 if state is None else state.version + 1
    through = 0.0 if state is None else state.counted_through
    return LimitState(
        limit=max_concurrency, version=version, changed_at=now, counted_through=through, since=now
    )
