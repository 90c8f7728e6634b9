"""An adaptive pool's limit L: cut on throttle signals, grown back by a search that speeds up.

A pool with ``adaptive`` settings learns its downstream's capacity from its workflows' own
throttling failures (DESIGN.md, "Adaptive limit"; docs/adaptive.md states the rule in
full). L starts at ``initial`` and stays within [min(min, MAX), MAX]; the tick uses it in
place of MAX. Everything here is pure: the ends arrive as values, time as ``now`` (epoch
seconds), and what L was as a `LimitState` the state table kept.

- **A fall** comes at most once per ``cooldown_seconds``: to ⌊L x decrease⌋, or deeper by
  the evidence, L less the signals of this overload (each is a slot too many), never below
  ``min``. An overload is the signals that follow one another within a cooldown: a single
  signal after a clean spell cuts exactly to ⌊L x decrease⌋.
- **Growth** (BIC's binary search, then its probing): the first step after L changed is +1
  once L executions ended clean; later steps come at most once a cooldown, each after as
  many clean ends as its size. Below the level of the last fall (the *peak*: L before it,
  less the evidence) a step goes half the way there; at the peak, L holds for one more round
  of L clean ends, then probes beyond by 1, 2, 4, … A step is never more than a quarter of
  L, never past MAX, and none is taken while RUNNING is below L / 2. A signal sets the step
  back to 1 and the next step back to the first.

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
    initial: StrictInt | None = Field(default=None, ge=1)
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
            initial=self.initial,
            decrease=float(self.decrease),
            cooldown_seconds=float(self.cooldown_seconds),
        )


@dataclass(frozen=True)
class Adaptive:
    """A pool's adaptive settings (`AdaptiveDocument`, validated)."""

    errors: tuple[str, ...]
    """The error names that mean "throttled"."""
    min: int = DEFAULT_MIN
    initial: int | None = None
    """Where L starts, and where `reset` puts it back (None: MAX)."""
    decrease: float = DEFAULT_DECREASE
    """L becomes floor(L * decrease) on a signal."""
    cooldown_seconds: float = DEFAULT_COOLDOWN_SECONDS
    """At most one decrease per this long (the other signals of one overload are ignored)."""

    def as_json(self) -> dict[str, Any]:
        """The settings as the contract spells them (``initial`` only when set: else it is MAX)."""
        return {
            "errors": list(self.errors),
            "min": self.min,
            **({} if self.initial is None else {"initial": self.initial}),
            "decrease": self.decrease,
            "cooldown_seconds": self.cooldown_seconds,
        }


def bounds(adaptive: Adaptive, max_concurrency: int) -> tuple[int, int]:
    """The range L stays in: [min(min, MAX), MAX]."""
    return min(adaptive.min, max_concurrency), max_concurrency


def initial_limit(adaptive: Adaptive, max_concurrency: int) -> int:
    """Where L starts (and `reset` puts it): ``initial`` clamped into the bounds, MAX without it."""
    low, high = bounds(adaptive, max_concurrency)
    return min(max(adaptive.initial or high, low), high)


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
    probing: bool = False
    """L has grown since it last fell or was reset: later steps are paced by the cooldown."""
    step: int = 1
    """The next step beyond the peak: doubled after each, back to 1 on a signal."""
    peak: int | None = None
    """The level of the last fall (L before it, less its evidence): steps below it go half the way."""
    evidence: int = 0
    """The signals of the overload going on (since the last fall): each a slot too many."""
    signal_at: float | None = None
    """When the latest signal counted ended: one more than a cooldown later starts a new overload."""
    floor_since: float | None = None
    """Since when L has sat at its lowest, min(min, MAX) (None: it isn't there): the alarm's."""


def limit_of(state: LimitState | None, adaptive: Adaptive | None, max_concurrency: int) -> int:
    """L as the tick uses it: MAX when the pool doesn't adapt, its start when it never did; else clamped."""
    if adaptive is None:
        return max_concurrency
    if state is None:
        return initial_limit(adaptive, max_concurrency)
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
    first = state or LimitState(limit=initial_limit(adaptive, max_concurrency), changed_at=now)
    low, high = bounds(adaptive, max_concurrency)
    moving = _Moving(first, min(max(first.limit, low), high))
    for end in _in_order(ends):
        if end.error is not None and end.error in adaptive.errors:
            _signal(moving, end, adaptive, low)
        else:
            _clean(moving, end)
    increases = _grow(moving, adaptive, running=running, high=high, now=now)
    final = replace(moving.state, limit=moving.limit, floor_since=_floor_since(first, moving.limit, low, now))
    changed = state is None or final != state
    if changed:
        final = replace(final, version=first.version + (0 if state is None else 1))
    return Adaptation(final, tuple(moving.decreases), increases, tuple(moving.ignored), changed)


def _in_order(ends: Iterable[PoolEnd]) -> list[PoolEnd]:
    """The ends in the order they ended, each execution once (its latest end)."""
    latest: dict[str, PoolEnd] = {}
    for end in ends:
        if end.name not in latest or end.stopped_at > latest[end.name].stopped_at:
            latest[end.name] = end
    return sorted(latest.values(), key=lambda end: (end.stopped_at, end.name))


def _floor_since(first: LimitState, limit: int, low: int, now: float) -> float | None:
    """Since when L has sat at its lowest: kept while it stays there, ``now`` when it arrives, else None."""
    if limit != low:
        return None
    return now if first.floor_since is None else first.floor_since


def _signal(moving: _Moving, end: PoolEnd, adaptive: Adaptive, low: int) -> None:
    """A throttle signal: evidence of a slot too many; a fall unless the last one's cooldown still runs."""
    if end.stopped_at <= moving.state.since:
        return  # before a reset: the operator said to forget it
    new = end.stopped_at > moving.state.counted_through
    state = _evidence(moving.state, end, adaptive) if new else moving.state
    if state.cut_by is not None and end.stopped_at <= state.cut_by + adaptive.cooldown_seconds:
        moving.ignored.append(end.name)
        if new and end.stopped_at > state.changed_at:  # the overload goes on: nothing grows yet,
            peak = None if state.peak is None else max(moving.limit, state.peak - 1)  # and it was lower
            state = replace(state, clean=0, step=1, probing=False, peak=peak)
        moving.state = state
        return
    _fall(moving, state, end, adaptive, low)


def _evidence(state: LimitState, end: PoolEnd, adaptive: Adaptive) -> LimitState:
    """A new signal counted: one more of this overload, or the first of a new one (a cooldown apart)."""
    apart = state.signal_at is not None and end.stopped_at - state.signal_at > adaptive.cooldown_seconds
    return replace(
        state,
        evidence=1 if apart else state.evidence + 1,
        signal_at=end.stopped_at,
        counted_through=end.stopped_at,
    )


def _fall(moving: _Moving, state: LimitState, end: PoolEnd, adaptive: Adaptive, low: int) -> None:
    """L falls to floor(L x decrease), or by the overload's evidence if deeper, never below ``min``."""
    before = moving.limit
    evidence = max(1, state.evidence)
    moving.limit = max(low, min(math.floor(before * adaptive.decrease), before - evidence))
    moving.decreases.append(Decrease(end.name, end.error or "", before, moving.limit))
    moving.state = replace(
        state,
        cut_by=end.stopped_at,
        cut_execution=end.name,
        changed_at=max(state.changed_at, end.stopped_at),
        clean=0,
        probing=False,
        step=1,
        peak=max(moving.limit, before - evidence),
        evidence=0,
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


def _grow(moving: _Moving, adaptive: Adaptive, *, running: int, high: int, now: float) -> int:
    """At most one step a tick: the first +1 after L clean ends, then the search (module doc)."""
    state, limit = moving.state, moving.limit
    size, needs = _next_step(state, limit, high)
    paced = not state.probing or now - state.changed_at >= adaptive.cooldown_seconds
    if size < 1 or running * 2 < limit or state.clean < needs or not paced:
        # A pool that can't grow (at MAX, or not using L) keeps at most one L's worth: it learns nothing more.
        moving.state = replace(state, clean=min(state.clean, limit))
        return 0
    beyond = state.peak is None or limit >= state.peak
    if not state.probing:
        step = 2 if state.peak is None else 1  # nothing learned to fear: the search begins at once
    else:
        step = min(state.step * 2, high) if beyond else state.step
    moving.limit = limit + size
    moving.state = replace(
        state, clean=min(state.clean - needs, moving.limit), changed_at=now, probing=True, step=step
    )
    return size


def _next_step(state: LimitState, limit: int, high: int) -> tuple[int, int]:
    """The next step's size and the clean ends it needs since L last changed (size 0: none can come)."""
    room = high - limit
    if not state.probing:
        return min(1, room), limit
    below = state.peak is not None and limit < state.peak
    wanted = max(1, (state.peak - limit) // 2) if below and state.peak is not None else state.step
    size = min(wanted, max(1, limit // 4), room)
    at_peak = not below and state.step == 1  # L holds one more round there before it probes
    return size, limit if at_peak else size


def reset(state: LimitState | None, limit: int, now: float) -> LimitState:
    """L back to ``limit`` (`reset-limit`: `initial_limit`; turned off: MAX), the past forgotten."""
    version = 0 if state is None else state.version + 1
    through = 0.0 if state is None else state.counted_through
    return LimitState(
        limit=limit,
        version=version,
        changed_at=now,
        counted_through=through,
        since=now,
    )
