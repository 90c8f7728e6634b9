"""Producers that wake the dispatcher in generated scenarios (DESIGN.md, "Start on arrival").

A share of the scenarios has its producer wake the dispatcher after it queues jobs, as the
producer client does: at most one wake a (virtual) second, sent after the job, onto the
end-event queue, from where it comes alone or in a batch with the ends. A wake may be lost,
delivered twice, delivered late, or refused by the queue (nothing arrives, and the send
still counts). The world's checks stay as they are: a wake must never make the dispatcher
exceed a limit, start twice or lose a job, and a lost one only delays a job until the next
trigger (the quiet phase's drain bound still holds).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from dispatcher.core.events import WAKE_INTERVAL_SECONDS, WAKE_KEY
from tests.support.world import World

WAKE_SHARE = 0.4
"""Scenarios whose producer wakes."""


@dataclass(frozen=True)
class WakePlan:
    """How a scenario's wakes fare on their way to the function."""

    lost: float
    doubled: float
    refused: float
    delay: float
    """Seconds between a wake's send and its delivery (the mapping's window, or a late one)."""

    def describe(self) -> str:
        """The plan in the scenario's one line."""
        return f"wakes(lost={self.lost} doubled={self.doubled} refused={self.refused} delay={self.delay})"


def plan_wakes(rng: random.Random, *, faults: bool) -> WakePlan | None:
    """A scenario's wakes (None: its producer sends none), from a stream of their own."""
    if rng.random() >= WAKE_SHARE:
        return None
    if not faults:
        return WakePlan(lost=0.0, doubled=0.0, refused=0.0, delay=rng.choice([0.0, 1.0]))
    return WakePlan(
        lost=rng.choice([0.0, 0.2, 0.5]),
        doubled=rng.choice([0.0, 0.2, 0.5]),
        refused=rng.choice([0.0, 0.0, 0.3]),
        delay=rng.choice([0.0, 1.0, 2.0, 30.0]),
    )


class Wakes:
    """One producer's wakes, sent after its jobs, at most one a second of the world's clock."""

    def __init__(self, plan: WakePlan, world: World, rng: random.Random) -> None:
        self._plan = plan
        self._world = world
        self._rng = rng
        self._last: float | None = None

    def after_send(self) -> None:
        """A job is on the queue: wake the dispatcher, unless a wake went less than a second ago."""
        world, plan, rng = self._world, self._plan, self._rng
        now = world.now
        if self._last is not None and now - self._last < WAKE_INTERVAL_SECONDS:
            world.injected["wake spared (one went within the second)"] += 1
            return
        self._last = now
        if rng.random() < plan.refused:
            world.injected["wake refused by its queue (the send went on)"] += 1
            return
        if rng.random() < plan.lost:
            world.injected["wake lost"] += 1
            return
        wake = {WAKE_KEY: True, "sentAt": now}
        world.deliver_later(wake, plan.delay)
        if rng.random() < plan.doubled:
            world.injected["wake delivered twice"] += 1
            world.deliver_later(dict(wake), plan.delay + rng.choice([1.0, 30.0]))
