"""Faults in the in-memory AWS: a process that dies at a chosen step, throttles, failed delete entries.

A crash is what the fault harness does on moto (`tests/faults/process.py`), at the same
steps under the same names (`tests/support/crashes.py`): at the chosen step the invocation's process dies, and
every later call of that invocation, from any of its threads, dies before it is made, so
no cleanup reaches AWS. What it held comes back as on AWS: its messages when their
visibility timeout ends, its lease when its invocation's time is up, its recorded starts
after 90 s.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from tests.support.crashes import Crash, CrashPlan


@dataclass
class Process:
    """One container's process: it counts its calls by step, and once dead stays dead."""

    plan: CrashPlan | None = None
    dead: bool = False
    seen: Counter[str] = field(default_factory=Counter)

    def before(self, step: str) -> int:
        """A call of ``step`` is about to be made: which call of it this is, in the order they were made."""
        if self.dead:
            raise Crash(f"{step} after the process died")
        self.seen[step] += 1
        nth = self.seen[step]
        self._maybe("before", step, nth)
        return nth

    def after(self, step: str, nth: int) -> None:
        """The ``nth`` call of ``step`` was made (its effect is done)."""
        self._maybe("after", step, nth)

    def _maybe(self, when: str, step: str, nth: int) -> None:
        plan = self.plan
        if plan is not None and (plan.operation, plan.when, plan.nth) == (step, when, nth):
            self.dead = True
            raise Crash(str(plan))


@dataclass
class Faults:
    """Faults injected into the dispatcher's calls, each drawn from one seeded stream."""

    rng: random.Random
    throttle: dict[str, float] = field(default_factory=dict)
    """Operation → chance an attempt is throttled (on top of AWS's quotas)."""
    partial_delete: float = 0.0
    """Chance each `DeleteMessageBatch` entry fails."""
    enabled: bool = True
    injected: Counter[str] = field(default_factory=Counter)

    def throttled(self, operation: str) -> bool:
        """Whether this attempt of ``operation`` is throttled by the plan.

        Only an operation the plan throttles draws from the stream: a call of another one
        (say, a new one the tick makes) leaves every later draw as it was.
        """
        chance = self.throttle.get(operation, 0.0)
        hit = self.enabled and chance > 0 and self.rng.random() < chance
        if hit:
            self.injected[f"throttle {operation}"] += 1
        return hit

    def delete_fails(self) -> bool:
        """Whether this `DeleteMessageBatch` entry fails."""
        hit = self.enabled and self.partial_delete > 0 and self.rng.random() < self.partial_delete
        if hit:
            self.injected["failed DeleteMessageBatch entry"] += 1
        return hit
