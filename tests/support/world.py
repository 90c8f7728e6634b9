"""The ground truth of a test world: virtual time, executions and their runs, events, in-flight messages.

`World` knows when each execution truly started and ended, on a virtual clock (or the
real one, for the benchmark), and what an eventually consistent `ListExecutions` or
`DescribeExecution` would show at any moment (`Lag`, `LaggingReads`). It checks the cap at the moment
of every start or redrive the dispatcher makes, draws the faults a `FaultPlan` asks
for and the status change events an `EventPlan` delivers (lost, duplicated, late).
The moto-backed fault harness (`tests.support.faulty_aws`) and the benchmark drive it.

A run whose input says ``{"downstream": true}`` fails when it ends during the world's
outage (``outage_until``), as a job calling a downstream API in maintenance would; the
status change event of every failed run goes to the failure spool, sometimes twice.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dispatcher.core.executions import REDRIVABLE_STATUSES, state_machine_of
from dispatcher.core.pacing import LISTING_MAX_AGE_SECONDS
from dispatcher.local.redrive import Redrives
from tests.support.downstream import DownstreamCapacity
from tests.support.plans import EventPlan, FaultPlan
from tests.support.reads import LaggingReads
from tests.support.runs import (
    Delivery,
    Execution,
    GroupCaps,
    InFlight,
    Run,
    calls_downstream,
    execution_event,
    planned_seconds,
    planned_slots,
)

if TYPE_CHECKING:
    from tests.support.adaptive_watch import AdaptiveWatch
    from tests.support.gate_world import Gates

LIST_REUSE_SECONDS = LISTING_MAX_AGE_SECONDS
"""How long the dispatcher may reuse a list read (1 s by default, up to this while the account's
`ListExecutions` pace is short): a foreign execution counts once a read this old could show it."""


class World(LaggingReads, DownstreamCapacity):
    """The ground truth: virtual time, executions, in-flight messages, injected faults.

    With a ``clock`` (the benchmark's `time.time`) the world runs on real time instead:
    `advance(0, ...)` then only ends the executions whose time has come.
    """

    adaptive: AdaptiveWatch | None = None
    """An adaptive pool's limit, as the dispatcher writes it, checked (`tests.support.adaptive_watch`)."""

    def __init__(
        self,
        *,
        seed: int,
        start: float,
        faults: FaultPlan | None = None,
        events: EventPlan | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._virtual_now = start
        self._clock = clock
        self.faults = faults or FaultPlan()
        self.events = events or EventPlan()
        # One stream per purpose: concurrent starts reach the world in any order, and
        # separate streams keep each kind of draw the same whatever that order is.
        self.rng, self.lag_rng, self.event_rng = (
            random.Random(f"{seed}:{purpose}") for purpose in ("faults", "lag", "events")
        )
        self.executions: dict[str, Execution] = {}
        self.in_flight: dict[str, InFlight] = {}
        self.received: dict[str, list[float]] = {}
        """SQS MessageId → each moment the dispatcher received it, on the virtual clock."""
        self.sent_at: dict[str, float] = {}
        """SQS MessageId → when it was sent, on the virtual clock (its SentTimestamp)."""
        self.deliveries: list[Delivery] = []
        self._deliveries_made = itertools.count()
        self.on_delivery: Callable[[Delivery], None] | None = None
        """Told of every event delivery as it is planned (the in-memory AWS schedules it)."""
        self.injected: Counter[str] = Counter()
        self.unreported: dict[str, float] = {}
        """ARN → when it ended, of each execution whose status change event was lost."""
        self.violations: list[str] = []
        self.max_concurrency: int | None = None
        self.pool_caps: dict[str, tuple[frozenset[str], int]] = {}
        """Pool → (its state machines' ARNs, its MAX): each checked at every start of one of them."""
        self.groups = GroupCaps()
        """Each lane's limit per message group, checked at every start and redrive by the dispatcher."""
        self.gates: Gates | None = None
        """The gates and their entries, when the world has gated executions (`tests.support.gate_world`)."""
        self.outage_until = 0.0
        """Until then, runs of jobs that call the downstream API fail."""

        self.spooled: list[dict[str, Any]] = []
        """Failure events for the spool queue, to be sent outside the lock (`take_spooled`)."""
        self.redrives = Redrives()
        """The client tokens of recent redrives (AWS's rules: `Redrives`)."""
        self.dispatcher_redrives: list[tuple[str, int]] = []
        """(execution name, its redriveCount before) for each redrive the dispatcher made."""
        self.lock = threading.RLock()
        # Indexes, so that a world of a hundred thousand executions answers as fast as one of ten:
        self._open: dict[str, Execution] = {}
        """Executions whose latest run has not ended."""
        self._open_foreign: dict[str, Execution] = {}
        """Of those, someone else's."""
        self._foreign_by_machine: defaultdict[str, dict[str, Execution]] = defaultdict(dict)
        """The same by state machine ARN (a gate's workflows are all someone else's)."""
        self._open_in: defaultdict[str, dict[str, Execution]] = defaultdict(dict)
        """State machine ARN → its open executions."""
        self._open_by_machine: Counter[str] = Counter()
        """State machine ARN → the slots its open executions take (a job's size each; someone else's 1)."""
        self._ends: list[tuple[float, int, str, int]] = []
        """A heap of (planned end, sequence, ARN, run index) of the runs not ended."""
        self._ended: deque[tuple[float, str]] = deque()
        """(ended at, ARN) of runs that ended, in time order: the list may still show them."""

    # -- time -------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The world's time: virtual, or the real clock it was given."""
        return self._virtual_now if self._clock is None else self._clock()

    def time(self) -> float:
        """The virtual clock, in epoch seconds (the dispatcher's `time.time`)."""
        return self.now

    def advance(self, seconds: float, end: Callable[[Execution], None]) -> None:
        """Move the clock; end executions whose duration is over (and queue their events).

        Executions due at once end in the order they were started.
        """
        with self.lock:
            if self._clock is None:
                self._virtual_now += seconds
            due = []
            while self._ends and self._ends[0][0] <= self.now:
                _, _, arn, index = heapq.heappop(self._ends)
                execution = self.executions[arn]
                if index == len(execution.runs) - 1 and execution.runs[index].ended_at is None:
                    due.append(execution)
            due.sort(key=lambda execution: execution.sequence)
            for execution in due:
                run = execution.runs[-1]
                run.ended_at = max(run.planned_end, run.started_at)
                if run.throttled or (calls_downstream(execution.input) and run.ended_at < self.outage_until):
                    run.status = "FAILED"
                self._close(execution)
                end(execution)
                self._emit_end(execution)
            self._ended.extend(sorted((execution.ended_at or self.now, execution.arn) for execution in due))

    def next_moment(self) -> float | None:
        """The next virtual time something happens by itself: an end, or an event delivery."""
        with self.lock:
            while self._ends and not self._pending(self._ends[0]):
                heapq.heappop(self._ends)
            ends = [self._ends[0][0]] if self._ends else []
            deliveries = [delivery.at for delivery in self.deliveries]
            return min([*ends, *deliveries], default=None)

    def _pending(self, entry: tuple[float, int, str, int]) -> bool:
        """Whether a heap entry is the latest run of its execution, not ended yet."""
        _, _, arn, index = entry
        runs = self.executions[arn].runs
        return index == len(runs) - 1 and runs[index].ended_at is None

    def _open_run(self, execution: Execution) -> None:
        run = execution.runs[-1]
        machine = state_machine_of(execution.arn)
        if execution.arn not in self._open:
            self._open_by_machine[machine] += execution.slots
        self._open[execution.arn] = execution
        self._open_in[machine][execution.arn] = execution
        if not execution.by_dispatcher:
            self._open_foreign[execution.arn] = execution
            self._foreign_by_machine[machine][execution.arn] = execution
        heapq.heappush(
            self._ends, (run.planned_end, execution.sequence, execution.arn, len(execution.runs) - 1)
        )

    def _close(self, execution: Execution) -> None:
        machine = state_machine_of(execution.arn)
        if self._open.pop(execution.arn, None) is not None:
            self._open_by_machine[machine] -= execution.slots
            del self._open_in[machine][execution.arn]
        if self._open_foreign.pop(execution.arn, None) is not None:
            del self._foreign_by_machine[machine][execution.arn]
        if self.gates is not None:
            self.gates.ended(execution)

    def due_events(self) -> list[dict[str, Any]]:
        """Events whose delivery time has come, in delivery order; they leave the queue."""
        with self.lock:
            self.deliveries.sort()
            due = [delivery for delivery in self.deliveries if delivery.at <= self.now]
            self.deliveries = self.deliveries[len(due) :]
            return [delivery.event for delivery in due]

    def deliver_later(self, event: dict[str, Any], delay: float) -> None:
        """Deliver ``event`` (a whole invocation's event) again after ``delay`` seconds."""
        with self.lock:
            self.deliveries.append(Delivery(self.now + delay, next(self._deliveries_made), event))

    def take_spooled(self) -> list[dict[str, Any]]:
        """Failure events due for the spool; they leave the world."""
        with self.lock:
            spooled, self.spooled = self.spooled, []
            return spooled

    def _emit_end(self, execution: Execution) -> None:
        status = execution.runs[-1].status
        gated = self.gates is not None and state_machine_of(execution.arn) in self.gates.machines
        if status in REDRIVABLE_STATUSES and not gated:
            # A gate's executions are their producers', not the dispatcher's: no spool rule has them.
            event = execution_event(execution, status)
            copies = 2 if self.event_rng.random() < self.events.duplicated else 1
            self.spooled += [event] * copies
        plan = self.events
        if not plan.enabled:
            return
        if self.event_rng.random() < plan.lost:
            self.injected["status change event lost"] += 1
            self.unreported[execution.arn] = self.now
            return
        copies = 2 if self.event_rng.random() < plan.duplicated else 1
        if copies == 2:
            self.injected["status change event duplicated"] += 1
        event = execution_event(execution, status)
        for _ in range(copies):
            at = self.now + self.event_rng.uniform(0, plan.delay)
            delivery = Delivery(at, next(self._deliveries_made), event)
            self.deliveries.append(delivery)
            if self.on_delivery is not None:
                self.on_delivery(delivery)

    def redrive(self, arn: str, seconds: float | None = None, *, by_dispatcher: bool = False) -> None:
        """Redrive an ended execution: it runs again, for ``seconds`` or as its input says (moto has none).

        A redrive by the dispatcher is checked against the cap like a start.
        """
        with self.lock:
            execution = self.executions[arn]
            lag = self.faults.lag
            planned = planned_seconds(execution.input) if seconds is None else seconds
            execution.runs.append(
                Run(
                    started_at=self.now,
                    planned_end=self.now + planned,
                    appear_after=self.lag_rng.uniform(0, lag.start),
                    vanish_after=self.lag_rng.uniform(0, lag.end),
                )
            )
            self._throttle(execution)
            self._open_run(execution)
            if by_dispatcher:
                self.dispatcher_redrives.append((execution.name, len(execution.runs) - 2))
                self._check_cap(
                    f"the dispatcher redrove {execution.name}", state_machine_of(arn), execution.slots
                )
                self._check_group(execution.name, f"the dispatcher redrove {execution.name}")

    def expired_in_flight(self) -> list[str]:
        """Receipt handles whose visibility timeout is over; they are forgotten here."""
        with self.lock:
            expired = [
                message_id for message_id, held in self.in_flight.items() if held.visible_at <= self.now
            ]
            return [self.in_flight.pop(message_id).receipt_handle for message_id in expired]

    # -- ground truth -----------------------------------------------------------------

    def running(self, moment: float | None = None) -> list[Execution]:
        """Executions RUNNING at ``moment`` (now by default), in the order they were started."""
        if moment is None:
            return sorted(self._open.values(), key=lambda execution: execution.sequence)
        return [execution for execution in self.executions.values() if execution.running_at(moment)]

    def started(self, arn: str, name: str, execution_input: str, *, by_dispatcher: bool) -> None:
        """Note a new execution; check the cap at the moment a dispatcher start happens."""
        with self.lock:
            if arn in self.executions:
                return
            seconds = planned_seconds(execution_input)
            lag = self.faults.lag
            run = Run(
                started_at=self.now,
                planned_end=self.now + seconds,
                appear_after=self.lag_rng.uniform(0, lag.start),
                vanish_after=self.lag_rng.uniform(0, lag.end),
            )
            self.executions[arn] = Execution(
                arn=arn,
                name=name,
                input=execution_input,
                sequence=len(self.executions),
                by_dispatcher=by_dispatcher,
                describe_after=self.lag_rng.uniform(0, lag.describe),
                runs=[run],
                slots=planned_slots(execution_input),
            )
            self._throttle(self.executions[arn])
            self._open_run(self.executions[arn])
            if by_dispatcher:
                started = self.executions[arn]
                self._check_cap(f"the dispatcher started {name}", state_machine_of(arn), started.slots)
                self._check_group(name, f"the dispatcher started {name}")

    def _check_cap(self, what: str, machine: str, started_slots: int = 1) -> None:
        if self.adaptive is not None:
            self.violations += self.adaptive.check_start(machine, self._counted, what, started_slots)
        for pool, (machines, _) in self.pool_caps.items():
            if machine in machines:
                self.check_pool(pool, what)
        if self.max_concurrency is None:
            return
        ours = sum(self._open_by_machine.values()) - len(self._open_foreign)  # someone else's: 1 each
        counted = ours + sum(self._accountable(execution) for execution in self._open_foreign.values())
        if counted > self.max_concurrency:
            self.violations.append(f"cap: {counted} RUNNING > MAX {self.max_concurrency} after {what}")

    def _check_group(self, name: str, what: str) -> None:
        """A lane's limit per group, now: the slots of the RUNNING executions of ``name``'s group."""
        key = self.groups.of.get(name)
        if key is None or key[0] not in self.groups.limits:
            return
        running = sum(
            execution.slots
            for execution in self._open.values()
            if execution.by_dispatcher and self.groups.of.get(execution.name) == key
        )
        limit = self.groups.limits[key[0]]
        if running > limit:
            self.violations.append(
                f"group: {running} slots RUNNING of group {key[1]} from lane {key[0]}"
                f" > max_per_group {limit} after {what}"
            )

    def check_pool(self, pool: str, what: str) -> None:
        """A pool's cap, now: its lanes' state machines' executions and who is inside its gates."""
        if pool not in self.pool_caps:
            return
        machines, cap = self.pool_caps[pool]
        counted = self._counted(machines) + (0 if self.gates is None else self.gates.inside_pool(pool))
        if counted > cap:
            self.violations.append(f"cap: {counted} RUNNING > MAX {cap} in pool {pool} after {what}")

    def finish(self, arn: str, status: str = "ABORTED", *, event: bool = True) -> None:
        """End an execution's latest run now (it was stopped, or failed), with its status change event.

        ``event``: False when its event is lost, whatever the event plan says.
        """
        with self.lock:
            execution = self.executions[arn]
            run = execution.runs[-1]
            if run.ended_at is not None:
                return
            run.ended_at, run.status = self.now, status
            self._close(execution)
            if event:
                self._emit_end(execution)
            self._ended.append((self.now, arn))

    def _counted(self, machines: frozenset[str]) -> int:
        """Open executions of ``machines`` that the dispatcher must count (`_accountable`)."""
        open_runs = sum(self._open_by_machine[arn] for arn in machines)
        foreign = [execution for arn in machines for execution in self._foreign_by_machine[arn].values()]
        return open_runs - len(foreign) + sum(self._accountable(execution) for execution in foreign)

    def _accountable(self, execution: Execution) -> bool:
        """Whether the dispatcher must count this execution when it starts another.

        Its own starts always (it recorded them); someone else's (a start or a redrive)
        once a `ListExecutions` read the dispatcher may still be reusing could show it:
        a foreign start the list doesn't show yet is invisible to anyone.
        """
        if execution.by_dispatcher:
            return True
        run = execution.runs[-1]
        delay = self.faults.lag.start if self.faults.lag.flaky else run.appear_after
        return run.started_at + delay + LIST_REUSE_SECONDS <= self.now

    def chance(self, rate: float) -> bool:
        """Draw whether a fault that hits at ``rate`` hits now (never while faults are off)."""
        return self.faults.enabled and rate > 0 and self.rng.random() < rate
