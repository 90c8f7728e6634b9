"""Gated executions in the in-memory AWS: a producer that keeps them coming, and each one's life.

An execution is started by its own producer (not the dispatcher: the producer's calls are
not counted against the dispatcher's quotas), reaches the gate after its free part and
sends its request (a message on the gate's queue, one group each); once admitted its
section lasts a while, then it sends its release to the end-event queue (as the template's
sample does) and, after its last free part, ends with its status change event. A share of
them die inside the section instead (aborted): with their event, or without any (lost).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dispatcher.core.executions import execution_arn
from tests.support.gate_world import Entry, Gates

if TYPE_CHECKING:
    from tests.support.sim.aws import InMemoryAws
    from tests.support.sim.function import Function

GATED_INPUT = json.dumps({"gated": True, "seconds": 1e9})
"""A gated execution ends when its life here says (the world would end it after its ``seconds``)."""


@dataclass(frozen=True)
class GatedWorkload:
    """How a gated execution lives: its free parts, its section, and whether it dies inside."""

    before: float = 0.0
    """Seconds from its start to its request."""
    section: tuple[float, float] = (5.0, 15.0)
    """Its section lasts a uniform draw between these (seconds)."""
    after: float = 1.0
    """Seconds from its release to its end."""
    dies_inside: float = 0.0
    """Chance it is aborted inside its section (no release)."""
    silent: float = 0.0
    """Of those, the chance its end event is lost too: only a check with Step Functions finds it."""


@dataclass(frozen=True)
class Death:
    """An execution aborted inside a section: when, and whether its event was lost."""

    arn: str
    at: float
    silent: bool


@dataclass
class GatedExecutions:
    """The executions of one gate's workflow, on the in-memory AWS's clock."""

    aws: InMemoryAws
    function: Function
    gate: str
    workload: GatedWorkload
    rng: random.Random
    deaths: list[Death] = field(default_factory=list)
    started: int = 0
    _names: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.gates.on_admit = self._admitted

    @property
    def gates(self) -> Gates:
        """The world's gates."""
        gates = self.aws.world.gates
        assert gates is not None, "the in-memory AWS has no gate"
        return gates

    def start(self, count: int) -> None:
        """The producer starts ``count`` executions now; each asks after its free part."""
        machine = self.aws.gate_machines[self.gate]
        scheduler = self.aws.scheduler
        for _ in range(count):
            name = f"gated-{next(self._names)}"
            arn = execution_arn(machine, name)
            self.aws.world.started(arn, name, GATED_INPUT, by_dispatcher=False)
            self.started += 1
            scheduler.call_at(scheduler.now + self.workload.before, lambda arn=arn: self._ask(arn))

    def keep_waiting(self, waiting: int, until: float) -> None:
        """A producer that keeps ``waiting`` executions waiting at the gate, checked every second."""
        scheduler = self.aws.scheduler

        def top_up() -> None:
            visible, in_flight = self.aws.gate_queues[self.gate].depth()
            self.start(max(0, waiting - visible - in_flight))
            if scheduler.now + 1 < until:
                scheduler.call_at(scheduler.now + 1, top_up)

        top_up()

    def _ask(self, arn: str) -> None:
        execution = self.aws.world.executions[arn]
        entry = self.gates.enter(execution, self.gate)
        body = json.dumps({"token": entry.token, "execution": arn})
        self.aws.gate_queues[self.gate].send(body, execution.name)

    def _admitted(self, entry: Entry) -> None:
        """`SendTaskSuccess` took its token: its section runs (or it dies inside)."""
        scheduler = self.aws.scheduler
        lasts = self.rng.uniform(*self.workload.section)
        if self.rng.random() < self.workload.dies_inside:
            silent = self.rng.random() < self.workload.silent
            scheduler.call_at(scheduler.now + self.rng.uniform(0, lasts), lambda: self._die(entry, silent))
        else:
            scheduler.call_at(scheduler.now + lasts, lambda: self._section_over(entry))

    def _section_over(self, entry: Entry) -> None:
        self.gates.leave(entry)
        self.function.release(self.gate, entry.execution.arn)
        scheduler = self.aws.scheduler
        arn = entry.execution.arn
        scheduler.call_at(
            scheduler.now + self.workload.after, lambda: self.aws.world.finish(arn, "SUCCEEDED")
        )

    def _die(self, entry: Entry, silent: bool) -> None:
        if entry.inside:
            self.deaths.append(Death(entry.execution.arn, self.aws.scheduler.now, silent))
            self.aws.world.finish(entry.execution.arn, "ABORTED", event=not silent)
