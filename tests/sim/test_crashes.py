"""A process killed at any step of a tick loses nothing, starts nothing twice, leaks nothing.

The fault harness's crash course (`tests/faults/crash_course.py`) on the in-memory AWS:
a backlog that reaches every step of a tick (poison, a name collision, starts throttled
70 % of the time, delete entries failing 30 %, a 60 s list lag, end events doubled), and
the process killed at one step on two ticks of three and on half of the event-triggered
ticks. With a redrive step, half of the jobs fail during a downstream outage and the
operator queues a redrive job for each failure. Then faults and events stop: every quiet
tick must count exactly what truly runs, and the backlog must drain. The generated
scenarios on moto crash at these steps too, drawn at random (and the soak at every one).

Unlike moto, whose FIFO deduplication window runs on the wall clock, the in-memory DLQ
keeps SQS's 5 minutes: a poison message whose delete keeps failing for longer than that
is in the DLQ again, as it would be on AWS (docs/guarantees.md says so).
"""

from __future__ import annotations

import math
import random

import pytest

from dispatcher.core.executions import REDRIVABLE_STATUSES
from dispatcher.core.messages import DISPATCH_ERROR_ATTRIBUTE, Job
from tests.faults.crash_course import crash_course
from tests.faults.jobs import POISON_KINDS
from tests.faults.scenario import Scenario
from tests.support.crashes import CRASH_POINTS, CrashPlan
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.deployment import function
from tests.support.sim.function import TIMEOUT_SECONDS
from tests.support.sim.sqs import VISIBILITY_TIMEOUT_SECONDS

pytestmark = pytest.mark.no_cover
"""Scale and whole runs of the in-memory AWS: untraced (tracing doubles a test's CPU time, and the
same lines run, measured, in tests/unit and tests/integration; CONTRIBUTING, "The suite's time")."""

RECENT_START_WINDOW_SECONDS = 90.0
MAX_DURATION_SECONDS = 1.0
"""The course's longest job."""


class Course:
    """One crash course on the in-memory AWS: the function, the operator, and what was seen."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        faults = scenario.faults
        self.lag = max(faults.lag.start, faults.lag.end)
        self.aws = InMemoryAws(lag=faults.lag, events=scenario.events, seed=scenario.seed)
        self.aws.faults.throttle = dict(faults.throttle)
        self.aws.faults.partial_delete = faults.partial_delete
        self.function = function(self.aws, scenario.max_concurrency)
        self.rng = random.Random(scenario.seed)
        self.tick: int | None = None
        self.function.crash_plan = self._crash_plan
        self.message_ids: dict[str, str] = {}
        self.redrive_jobs: set[tuple[str, int]] = set()
        self.violations: list[str] = []

    def _crash_plan(self, trigger: str) -> CrashPlan | None:
        """A scheduled tick dies as the scenario says; an event's tick dies at its rate."""
        if not self.aws.faults.enabled:
            return None
        if trigger == "schedule":
            return self.scenario.crashes.get(self.tick) if self.tick is not None else None
        hit = self.rng.random() < self.scenario.event_crash_rate
        return self.scenario.event_crash if hit else None

    def run(self) -> None:
        """The fault phase, a quiet drain, the operator's re-runs, then the checks."""
        scheduler, world = self.aws.scheduler, self.aws.world
        world.outage_until = scheduler.now + self.scenario.outage_seconds
        for tick in range(self.scenario.fault_ticks):
            for job in self.scenario.jobs:
                if job.arrives == tick:
                    self.message_ids[job.key] = self.aws.queue.send(job.body, job.group, job.name).message_id
            if tick in self.scenario.reruns:
                self.queue_redrives()
            self.tick = tick
            self.function.invoke({})
            scheduler.run_until(scheduler.now + self.scenario.intervals[tick])
        self.tick = None
        self.drain()
        world.outage_until = 0.0
        for _ in range(3):
            if not self.queue_redrives():
                break
            self.drain()
        scheduler.stop()
        self.check()

    def queue_redrives(self) -> int:
        """The operator: a redrive job for each spooled failure that still failed (as `rerun --redrive`)."""
        world = self.aws.world
        groups = {job.name: job.group for job in self.scenario.jobs}
        queued = 0
        for event in world.take_spooled():
            arn = event["detail"]["executionArn"]
            truly = world.truly(arn)
            if truly is None or truly[0] not in REDRIVABLE_STATUSES:
                continue
            name, count = event["detail"]["name"], truly[1]
            job = Job(world.executions[arn].input, groups[name], name, redrive_count=count)
            self.aws.queue.send(job.body, job.group, attributes=job.attributes())
            self.redrive_jobs.add((name, count))
            queued += 1
        return queued

    def drain(self) -> None:
        """Faults, events and crashes off: wait out holds and records, then tick, counts exact, to the end."""
        aws, scheduler = self.aws, self.aws.scheduler
        aws.faults.enabled = False
        aws.world.events.enabled = False
        aws.world.deliveries.clear()
        scheduler.run_until(
            scheduler.now + VISIBILITY_TIMEOUT_SECONDS + RECENT_START_WINDOW_SECONDS + self.lag + 1
        )
        left = sum(aws.queue.depth())
        collisions = sum(job.poison == "name collision" for job in self.scenario.jobs)
        bound = math.ceil(left / self.scenario.max_concurrency) + 2 + collisions
        for _ in range(bound):
            running = len(aws.world.running())
            self.function.invoke({})
            scheduler.run_until(scheduler.now + MAX_DURATION_SECONDS + self.lag + 1)
            report = self.function.invocations[-1].report
            if report is None:
                self.violations.append("a quiet tick raised")
                return
            if report["running"] != running:
                self.violations.append(
                    f"leak: a quiet tick counted {report['running']} RUNNING, truly {running}"
                )
            if report["stopped"] not in {"capacity", "drained", "throttled"}:
                self.violations.append(f"liveness: a quiet tick stopped with {report['stopped']!r}")
            if report["stopped"] == "drained" and aws.queue.depth() == (0, 0):
                return
        self.violations.append(f"liveness: {left} message(s) not drained within {bound} quiet ticks")

    def check(self) -> None:
        """Cap, no loss, no duplicates, order, poison, the lease, re-runs: as the harness on moto."""
        self.violations[:0] = self.aws.world.violations
        ours = {execution.name: execution for execution in self.aws.started()}
        valid = [job for job in self.scenario.jobs if job.poison is None]
        expected = {job.name or self.message_ids[job.key] for job in valid}
        self.violations += [f"loss: no execution for {name}" for name in sorted(expected - ours.keys())]
        self.violations += [f"duplicate: {name}" for name in sorted(ours.keys() - expected)]
        for job in valid:
            execution = ours.get(job.name or self.message_ids[job.key])
            if execution is not None and execution.input != job.body:
                self.violations.append(f"input: {job.key} started with another input")
        for group in {job.group for job in valid}:
            names = [job.name or self.message_ids[job.key] for job in valid if job.group == group]
            sequence = [ours[name].sequence for name in names if name in ours]
            if sequence != sorted(sequence):
                self.violations.append(f"order: group {group} started out of send order {sequence}")
        self._check_dead_letters()
        self._check_lease()
        if self.aws.queue.depth() != (0, 0):
            self.violations.append(f"loss: {self.aws.queue.depth()} left on the queue")
        for name, count in self.aws.world.dispatcher_redrives:
            if (name, count) not in self.redrive_jobs:
                self.violations.append(f"duplicate: {name} redriven at redriveCount {count}, asked by no job")
        for name, execution in ours.items():
            if execution.runs[-1].status == "FAILED" and execution.runs[-1].ended_at is not None:
                self.violations.append(f"loss: {name} failed and was never re-run")

    def _check_dead_letters(self) -> None:
        """Each poison message in the DLQ with its reason, and nothing else there."""
        letters: dict[str, list[str]] = {}
        for message, attributes in self.aws.dead_letters.letters:
            reason = attributes[DISPATCH_ERROR_ATTRIBUTE]["StringValue"]
            letters.setdefault(message.message_id, []).append(reason)
        for job in self.scenario.jobs:
            found = letters.pop(self.message_ids[job.key], [])
            if job.poison is None and found:
                self.violations.append(f"dead-lettered a valid job {job.key}: {found[0]}")
            if job.poison is not None and (
                not found or any(POISON_KINDS[job.poison] not in r for r in found)
            ):
                self.violations.append(f"poison {job.key} ({job.poison}) dead-lettered as {found}")
        self.violations += [f"DLQ holds a message never sent as poison: {id_}" for id_ in letters]

    def _check_lease(self) -> None:
        """The lease is found held only while an earlier tick may hold it; without it, no start."""
        invocations = sorted(self.function.invocations, key=lambda invocation: invocation.began)
        held_until = -math.inf
        for invocation in invocations:
            report = invocation.report
            if report is not None and report["stopped"] == "busy":
                if invocation.began > held_until:
                    self.violations.append(f"stall: the lease was held at {invocation.began:.1f}")
                if report["started"]:
                    self.violations.append(f"overlap: a tick without the lease started {report['started']}")
            else:
                held_until = max(held_until, invocation.began + TIMEOUT_SECONDS)


@pytest.mark.parametrize(
    "point", CRASH_POINTS, ids=[f"{when}-{operation}" for operation, when in CRASH_POINTS]
)
def test_a_crash_at_each_step_loses_nothing_and_starts_nothing_twice(point: tuple[str, str]) -> None:
    """Killing the process at any step leaves nothing lost, duplicated, over the cap or leaked."""
    course = Course(crash_course(CrashPlan(*point)))
    course.run()
    crashes = sum(invocation.crashed for invocation in course.function.invocations)
    assert crashes >= 1, f"the crash point {point} was never reached"
    assert course.aws.faults.injected["throttle StartExecution"] > 0, "no start was throttled, none released"
    assert course.aws.scheduler.errors == course.function.errors == []
    assert course.violations == [], course.scenario.describe()
