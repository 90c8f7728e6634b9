"""Gated executions in the test world: their requests' tokens, their admissions, who is truly inside.

The ground truth for gates, as `World` is for executions: an execution *enters* a gate (it
sends a request with a fresh task token and waits), is *admitted* when `SendTaskSuccess`
takes its token (AWS's rules: a token is taken once, and never once its task closed, as
when its execution ended), and is inside until its section is over or its execution ends.
At each admission the gate's MAX and its pool's are checked against who is truly inside
(and against the executions of the pool's lanes' state machines, as at every start).
Drivers (the fault harness, the in-memory AWS) decide when executions enter, how long a
section lasts, and what becomes of releases; this holds what happened.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.support.runs import Execution
    from tests.support.world import World

TASK_TIMED_OUT = "TaskTimedOut"
INVALID_TOKEN = "InvalidToken"


@dataclass
class Entry:
    """One execution's entry into a gate: its token, and what became of it."""

    execution: Execution
    gate: str
    token: str
    requested_at: float
    admitted_at: float | None = None
    left_at: float | None = None
    """When its section was over (or its execution ended inside)."""
    closed: bool = False
    """Its task closed before it was admitted (its execution ended while it waited)."""
    group: str | None = None
    """Its request's message group (its tenant)."""

    @property
    def waiting(self) -> bool:
        """It sent its request and was neither admitted nor closed."""
        return self.admitted_at is None and not self.closed

    @property
    def inside(self) -> bool:
        """Admitted, and not left yet."""
        return self.admitted_at is not None and self.left_at is None


@dataclass
class GateSpec:
    """A gate as the world checks it: its pool and its own MAX (None: the pool's alone)."""

    pool: str
    max_concurrency: int | None = None
    max_per_group: int | None = None


@dataclass
class Gates:
    """Every gate of a world: entries by token, who is inside, the caps checked at each admission."""

    world: World
    specs: dict[str, GateSpec] = field(default_factory=dict)
    machines: set[str] = field(default_factory=set)
    """The gated state machines (their failures are not the dispatcher's to re-run)."""
    entries: dict[str, Entry] = field(default_factory=dict)
    """Token → its entry."""
    current: dict[str, Entry] = field(default_factory=dict)
    """Execution ARN → its latest entry."""
    accepted: Counter[str] = field(default_factory=Counter)
    """Token → how many `SendTaskSuccess` calls took it (AWS: at most one)."""
    refused: Counter[str] = field(default_factory=Counter)
    admissions: list[tuple[float, str]] = field(default_factory=list)
    """(when, execution ARN) of every admission, in order."""
    on_admit: Callable[[Entry], None] | None = None
    """Told of each admission as it happens (under the world's lock): a driver runs the section."""
    _tokens: itertools.count[int] = field(default_factory=itertools.count)
    _inside: dict[str, dict[str, Entry]] = field(default_factory=dict)
    """Gate → execution ARN → its entry, of those truly inside (an index: worlds hold thousands)."""

    def inside(self, gate: str) -> list[Entry]:
        """The entries truly inside ``gate`` now."""
        return list(self._inside.get(gate, {}).values())

    def inside_pool(self, pool: str) -> int:
        """Executions truly inside the gates of ``pool``."""
        return sum(len(self._inside.get(gate, {})) for gate, spec in self.specs.items() if spec.pool == pool)

    def _left(self, entry: Entry) -> None:
        entry.left_at = self.world.now
        self._inside.get(entry.gate, {}).pop(entry.execution.arn, None)

    def enter(self, execution: Execution, gate: str, group: str | None = None) -> Entry:
        """The execution reaches the gate: a fresh task token (the caller sends its request, in ``group``)."""
        with self.world.lock:
            token = f"task-token-{next(self._tokens)}-{execution.name}"
            entry = Entry(execution, gate, token, self.world.now, group=group)
            self.entries[entry.token] = entry
            self.current[execution.arn] = entry
            return entry

    def succeed(self, token: str) -> str | None:
        """`SendTaskSuccess(token)` as AWS answers it: None when it takes it, else the error code.

        A token never issued is `InvalidToken`; one taken already, or whose task closed
        (its execution ended while it waited), `TaskTimedOut`. A token taken admits its
        execution: the gate's and the pool's caps are checked that moment.
        """
        with self.world.lock:
            entry = self.entries.get(token)
            if entry is None:
                self.refused[token] += 1
                return INVALID_TOKEN
            if not entry.waiting or entry.execution.runs[-1].ended_at is not None:
                self.refused[token] += 1
                return TASK_TIMED_OUT
            entry.admitted_at = self.world.now
            self._inside.setdefault(entry.gate, {})[entry.execution.arn] = entry
            self.accepted[token] += 1
            self.admissions.append((self.world.now, entry.execution.arn))
            self._check(entry)
            if self.on_admit is not None:
                self.on_admit(entry)
            return None

    def leave(self, entry: Entry) -> None:
        """The section is over: the execution is no longer inside (whatever its release does)."""
        with self.world.lock:
            if entry.inside:
                self._left(entry)

    def ended(self, execution: Execution) -> None:
        """The execution ended: a token it waited with closes, and it leaves a section it was in."""
        entry = self.current.get(execution.arn)
        if entry is None:
            return
        if entry.waiting:
            entry.closed = True
        elif entry.inside:
            self._left(entry)

    def _check(self, entry: Entry) -> None:
        spec = self.specs[entry.gate]
        inside = len(self.inside(entry.gate))
        if spec.max_concurrency is not None and inside > spec.max_concurrency:
            self.world.violations.append(
                f"cap: {inside} inside gate {entry.gate} > its MAX {spec.max_concurrency}"
                f" after admitting {entry.execution.name}"
            )
        if spec.max_per_group is not None and entry.group is not None:
            group = sum(1 for other in self.inside(entry.gate) if other.group == entry.group)
            if group > spec.max_per_group:
                self.world.violations.append(
                    f"group: {group} of group {entry.group} inside gate {entry.gate} > max_per_group"
                    f" {spec.max_per_group} after admitting {entry.execution.name}"
                )
        self.world.check_pool(spec.pool, f"gate {entry.gate} admitted {entry.execution.name}")
