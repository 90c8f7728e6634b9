"""One generated scenario, run: the real handler against the faulty emulator, then the end checked.

`run_scenario` drives the real handler against the faulty emulator: a scheduled tick at
each step of the schedule and, between them, a tick for every status change event the
emulated EventBridge delivers, each tick a cold start or a warm one. First with faults
on, then with faults and events off until the queue drains (liveness must not depend on
best-effort events). It returns an `Outcome`: what was processed, what was injected, and
every violation of the invariants in DESIGN.md (`tests.faults.checks`). The quiet end is
`tests.faults.ending`; what the operator and others do meanwhile, `tests.faults.acts`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import uuid
from datetime import UTC, datetime
from typing import Any

import boto3

from dispatcher import handler
from dispatcher.core.control import Control
from dispatcher.core.jobs import start_by_text
from dispatcher.core.kinds import total_keys
from dispatcher.core.kinds.gate import GATE as GATE_KIND
from dispatcher.core.topology import DEFAULT
from dispatcher.core.topology import LANE as LANE_KIND
from dispatcher.local.account import REGION, environment
from dispatcher.local.stack import Stack, create_stack
from dispatcher.settings import variable
from tests.faults.acts import forget_stale_keys, misdirect, rerun, rerun_what_failed, start_external
from tests.faults.adaptive import AdaptiveRun
from tests.faults.batches import EndEventBatches
from tests.faults.checks import check_end_state, crossing_names
from tests.faults.ending import drain, queues, settle_gate
from tests.faults.following import Following
from tests.faults.gate_plans import GATE
from tests.faults.gates import GateRun
from tests.faults.jobs import MAX_DURATION_SECONDS, Job
from tests.faults.lanes import LANE, LaneRun, merged_lanes
from tests.faults.operator import leave_stale_key
from tests.faults.process import TICK_SECONDS, DispatcherProcess, on_virtual_time
from tests.faults.scenario import CONTROL_OVERRIDE, Scenario
from tests.faults.tally import FINISHED, Outcome
from tests.faults.waking import Wakes
from tests.support.crashes import CRASH_POINTS, CrashPlan
from tests.support.faulty_aws import (
    FaultyAws,
    backend_execution,
)
from tests.support.runs import Execution
from tests.support.world import World


class ScenarioRun:
    """One scenario against one emulator: send, tick, advance time, then check."""

    def __init__(self, scenario: Scenario, middleware: FaultyAws) -> None:  # noqa: PLR0915 — a part each
        self.scenario = scenario
        self.world = World(
            seed=scenario.seed, start=1_800_000_000.0, faults=scenario.faults, events=scenario.events
        )
        self.rng = random.Random(f"{scenario.seed}:ticks")
        self.world.max_concurrency = scenario.max_concurrency
        middleware.world = self.world
        boto3.setup_default_session()  # no hooks of an earlier run's dispatcher on our own clients
        # A scenario is a new deployment: no container of an earlier one ticks in it. Its
        # clock starts again at the same moment, and a warm container that remembered later
        # moments left held jobs undrained (soak seed 182 after seeds 2, 6, ..., 178).
        handler.reset_clients()
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.ssm = boto3.client("ssm", region_name=REGION)
        control = Control(max_concurrency=scenario.max_concurrency) if scenario.controlled else None
        self.stack: Stack = create_stack(f"s{scenario.seed}-{uuid.uuid4().hex[:6]}", control=control)
        self.lane_run: LaneRun | None = None
        self.lane: dict[str, Any] | None = None
        if scenario.lane is not None:
            self.lane_run = LaneRun(
                scenario.lane, self.stack.name, self.stack.state_machine_arn, scenario.max_concurrency
            )
            if scenario.tenants is not None:
                self.lane_run.entry.update(scenario.tenants.lane_options())
            self.lane = self.lane_run.entry
            self.lane_run.cap(self.world)
        self.gate_run: GateRun | None = None
        if scenario.gate is not None:
            clients = {
                "sqs": self.sqs,
                "stepfunctions": self.sfn,
                "dynamodb": boto3.client("dynamodb", region_name=REGION),
            }
            self.gate_run = GateRun(
                scenario.gate,
                self.stack,
                self.world,
                clients,
                group_limit=None if scenario.tenants is None else scenario.tenants.gate_limit,
            )
            self.gate_run.cap(self.stack.state_machine_arn, scenario.max_concurrency)
            if self.lane_run is not None:
                self.lane_run.cap(self.world)  # the lane's machine in its pool, beside the gate's places
        self.adaptive_run = None if scenario.adaptive is None else AdaptiveRun(scenario.adaptive, self)
        self._crossing = crossing_names(scenario.jobs)
        if scenario.tenants is not None:
            limits = {DEFAULT: scenario.tenants.default_limit, LANE: scenario.tenants.lane_limit}
            self.world.groups.limits = {lane: limit for lane, limit in limits.items() if limit is not None}
        self.process = DispatcherProcess(clock=self.world.time).install()
        self.batches = EndEventBatches(
            self.world, random.Random(f"{scenario.seed}:batches"), self.stack.state_machine_arn
        )
        self.wakes = (
            None
            if scenario.wakes is None
            else Wakes(scenario.wakes, self.world, random.Random(f"{scenario.seed}:waking"))
        )
        self.outcome = Outcome(scenario)
        self.event_ticks = self.warm_ticks = 0
        self.redrive_after: dict[str, float] = {}
        self.redrives: list[tuple[float, str]] = []
        self.lease_may_be_held_until = 0.0
        self.enclosing: list[float] = []
        """Until when each tick still running (this one's callers) may hold the lease."""
        self.world.outage_until = self.world.now + scenario.outage_seconds
        self.redrive_jobs: set[tuple[str, int]] = set()
        """(execution name, redriveCount) of every redrive job `rerun` sent."""
        self.restart_jobs: set[str] = set()
        self.rerun_queues: dict[str, set[str]] = {}
        """Execution name of each re-run job `rerun` sent → the queues it was sent to."""
        self.rerun_mode = scenario.rerun_mode
        """The mode the operator runs `rerun` in now (switched after a kill, with ``rerun_switch``)."""
        self.modes_used: set[str] = set()

    @functools.cached_property
    def following(self) -> Following | None:
        """The producer's following and cancelling, when its plan has any (`tests.faults.following`)."""
        return None if self.scenario.follow is None else Following(self, self.scenario.follow)

    def environment(self, **overrides: str) -> dict[str, str]:
        """The function's environment for this scenario."""
        return {
            **self.stack.environment(
                # Controlled: the parameter's MAX must win over a higher environment MAX.
                self.scenario.max_concurrency + (CONTROL_OVERRIDE if self.scenario.controlled else 0),
                receive_wait_seconds=0,
                start_concurrency=self.scenario.start_concurrency,
            ),
            variable("spool_queue_url"): self.stack.spool_queue_url,
            **({} if self.scenario.tenants is None else self.scenario.tenants.environment()),
            **self._bound(),
            **(
                {}
                if self.lanes_document() is None
                else {variable("lanes"): json.dumps(self.lanes_document())}
            ),
            **overrides,
        }

    def _bound(self) -> dict[str, str]:
        """``MAX_WAIT_SECONDS`` for lane default, when the producer's plan bounds its jobs' wait."""
        wait = None if self.scenario.follow is None else self.scenario.follow.max_wait_seconds
        return {} if wait is None else {variable("max_wait_seconds"): str(wait)}

    def lanes_document(self) -> dict[str, Any] | None:
        """``LANES``: the second lane, the gate (each with its pool), pool default's adaptive (None: none)."""
        return merged_lanes(
            *([] if self.lane_run is None else [json.loads(self.lane_run.lanes_variable())]),
            *([] if self.gate_run is None else [self.gate_run.lanes_document()]),
            *([] if self.adaptive_run is None else [self.adaptive_run.lanes() or {}]),
        )

    def run(self) -> Outcome:
        """Fault phase, then a quiet phase until drained, then the checks."""
        with on_virtual_time(self.world, self.advance), environment(self.environment()):
            for tick in range(self.scenario.fault_ticks):
                for job in self.scenario.jobs:
                    if job.arrives == tick:
                        self.send(job)
                start_external(self, tick)
                misdirect(self, tick)
                if tick in self.scenario.reruns:
                    rerun(self, self.scenario.reruns[tick])
                if self.following is not None:
                    self.following.before_tick(tick)
                    self.process.act = self.following.during(tick)
                self._tick(tick)
                if self.following is not None:
                    self.process.act = None
                    self.following.after_tick()
                self.advance(self.scenario.intervals[tick])
            if self.following is not None:
                self.following.before_tick(self.scenario.fault_ticks)
            self.outcome.executions_in_fault_phase = self._dispatcher_executions()
            drain(self)
            rerun_what_failed(self)
            if self.gate_run is not None:
                settle_gate(self)
            forget_stale_keys(self)
        check_end_state(self)
        if self.gate_run is not None:
            self.outcome.violations += self.gate_run.check()
        if self.lane_run is not None:
            # A name both lanes carry can't be told apart at its StartExecution call: left out.
            crossing = crossing_names(self.scenario.jobs)
            names = {job.execution_name for job in self.scenario.jobs if job.lane == LANE} - crossing
            self.outcome.violations += self.lane_run.rate_violations(self.process.starts, names)
        outcome = self.outcome
        outcome.injected = self.world.injected
        outcome.violations[:0] = self.world.violations + self.process.violations
        outcome.largest_blind_wave = self.process.largest_blind_wave
        outcome.calls = set(self.process.calls)
        outcome.stack = self.stack
        outcome.messages = len(self.scenario.jobs)
        outcome.executions = self._dispatcher_executions()
        outcome.event_ticks = self.event_ticks
        outcome.warm_ticks = self.warm_ticks
        outcome.redriven = len(self.world.dispatcher_redrives)
        if self.adaptive_run is not None:
            outcome.adaptive = self.adaptive_run.figures()
        if self.world.gates is not None and self.gate_run is not None:
            outcome.gate = self.gate_run.lanes_document()["gates"][0]
            outcome.admissions = len(self.world.gates.admissions)
            outcome.refused_tokens = sum(self.world.gates.refused.values())
        FINISHED.add(outcome)
        return outcome

    # -- driving ----------------------------------------------------------------------

    def _dispatcher_executions(self) -> int:
        return sum(execution.by_dispatcher for execution in self.world.executions.values())

    def send(self, job: Job) -> str:
        """Send one job as a producer would; note and return its MessageId."""
        request: dict[str, Any] = {
            "QueueUrl": self.stack.queue_url
            if job.lane is None or self.lane is None
            else self.lane["queue_url"],
            "MessageBody": job.body,
            "MessageGroupId": job.group,
            "MessageDeduplicationId": job.key,
        }
        follow = self.scenario.follow
        if follow is not None and job.key in follow.start_by:
            deadline = datetime.fromtimestamp(self.world.now + follow.start_by[job.key], UTC)
            job.attributes["StartBy"] = {"DataType": "String", "StringValue": start_by_text(deadline)}
        attributes = dict(job.attributes)
        if job.name is not None:
            value_field = "BinaryValue" if job.name_type == "Binary" else "StringValue"
            value = job.name.encode() if job.name_type == "Binary" else job.name
            attributes["ExecutionName"] = {"DataType": job.name_type, value_field: value}
        if attributes:
            request["MessageAttributes"] = attributes
        job.message_id = self.sqs.send_message(**request)["MessageId"]
        if job.poison is None and job.execution_name not in self._crossing:
            self.world.groups.of[job.execution_name] = (job.lane or DEFAULT, job.group)
        if self.wakes is not None:
            self.wakes.after_send()
        return job.message_id

    def tick(self, event: Any = None, *, cold: bool = True, **overrides: str) -> dict[str, Any]:
        """One tick with the function's environment (and overrides), on the virtual clock."""
        with on_virtual_time(self.world, self.advance), environment(self.environment(**overrides)):
            report = self.process.tick(event=event, cold=cold)
        assert report is not None
        return report

    def _steer_lane(self, tick: int | None) -> None:
        """The operator steers the lane or the gate, and the gate's executions go on, before this tick.

        Or leaves a stale key behind: one of a member no longer configured.
        """
        if tick in self.scenario.stale:
            leave_stale_key(self.ssm, self.stack.control_parameter, self.scenario.stale[tick])
            self.world.injected["stale control key (a member removed from LANES)"] += 1
        if self.lane_run is not None:
            self.lane_run.before_tick(self.ssm, self.stack.control_parameter, tick, self.world)
        if self.gate_run is not None and tick is not None:
            self.gate_run.before_tick(tick, self.ssm, self.stack.control_parameter)
        if self.adaptive_run is not None:
            self.adaptive_run.before_tick(tick)

    def _crash(self, tick: int | None, event: Any) -> CrashPlan | None:
        """Where this tick dies, if anywhere: as planned for a scheduled tick, or drawn for an event's."""
        if event is None:
            crash = self.scenario.crashes.get(tick) if tick is not None else None
            if self.scenario.gate is not None and tick is not None:
                crash = self.scenario.gate.crashes.get(tick, crash)
            return crash
        if self.world.faults.enabled and self.rng.random() < self.scenario.event_crash_rate:
            return self.scenario.event_crash or CrashPlan(
                *self.rng.choice(CRASH_POINTS), nth=self.rng.randint(1, 2)
            )
        return None

    def _tick(self, tick: int | None, event: Any = None) -> dict[str, Any] | None:
        if event is None:
            self._steer_lane(tick)
        crash = self._crash(tick, event)
        deadline = self.scenario.deadlines.get(tick) if tick is not None else None
        cold = self.rng.random() >= self.scenario.warm
        if cold and self.lane_run is not None and not self.enclosing:
            # A fresh read of the control parameter, and no tick that read it before still
            # running (one around this tick may go on with the old value until it ends).
            self.lane_run.cold_start(self.world)
        self.outcome.ticks += 1
        self.event_ticks += event is not None
        self.warm_ticks += not cold
        began = self.world.now
        inside = None if self.gate_run is None else self.gate_run.inside()
        # A tick that waits (a loop's pause, a keeper waiting for the next ask) lets
        # virtual time pass, and events due meanwhile tick inside it: they may find the
        # lease held by the tick around them, until its invocation's time would run out.
        self.enclosing.append(began + TICK_SECONDS)
        try:
            report = self.process.tick(event=event, cold=cold, crash=crash, deadline_after=deadline)
        except Exception as error:
            self.outcome.violations.append(
                f"tick {self.outcome.ticks} raised {type(error).__name__}: {error}"
            )
            return None
        finally:
            self.enclosing.pop()
        if report is None or report["stopped"] != "busy":
            # This tick may have left the lease behind (it died, or a write's answer was
            # lost), but only until its invocation's time would have run out.
            self.lease_may_be_held_until = began + TICK_SECONDS
        if report is None:
            self.outcome.crashes += 1
            return None
        self.outcome.reported.update(
            {key: report[key] for key in total_keys((LANE_KIND, GATE_KIND)) if key in report}
        )
        counted = report.get("gates", {}).get(GATE, {}).get("inside")
        if inside is not None and counted is not None and counted < inside:
            self.outcome.violations.append(
                f"cap: tick {self.outcome.ticks} counted {counted} inside gate {GATE}, truly {inside}"
            )
        if report["stopped"] == "busy":
            self.outcome.busy_ticks += 1
            if self.world.now > max([self.lease_may_be_held_until, *self.enclosing]):
                self.outcome.violations.append(
                    f"stall: tick {self.outcome.ticks} found the lease held at {self.world.now:.1f},"
                    f" when the last lease taken had expired at {self.lease_may_be_held_until:.1f}"
                )
            if report["started"]:
                self.outcome.violations.append(
                    f"overlap: a tick without the lease started {report['started']}"
                )
        return report

    def advance(self, seconds: float) -> None:
        """Let virtual time pass: executions end, events arrive (each one a tick), messages reappear.

        A gate's executions go on too: they ask, run their sections, release and end.
        """
        target = self.world.now + seconds
        while True:
            moments = [
                self.world.next_moment(),
                None if self.gate_run is None else self.gate_run.next_moment(),
            ]
            moment = min((moment for moment in moments if moment is not None), default=None)
            if moment is None or moment > target:
                break
            self._move(max(0.0, moment - self.world.now))
            if self.gate_run is not None:
                self.gate_run.run_due()
            for event in self.batches.invocations(self.world.due_events()):
                self._tick(None, event=event)
        self._move(target - self.world.now)

    def _move(self, seconds: float) -> None:
        def end(execution: Execution) -> None:
            record = backend_execution(execution.arn)
            record.status = execution.runs[-1].status
            self.outcome.failures += record.status == "FAILED"
            record.stop_date = record.stop_date or record.start_date
            redrive_after = self.redrive_after.pop(execution.arn, None)
            if redrive_after is not None:
                self.redrives.append((self.world.now + redrive_after, execution.arn))

        self.world.advance(seconds, end)
        for event in self.world.take_spooled():
            self.sqs.send_message(QueueUrl=self.stack.spool_queue_url, MessageBody=json.dumps(event))
        for at, arn in list(self.redrives):
            if at <= self.world.now:
                self.redrives.remove((at, arn))
                self.world.redrive(arn, MAX_DURATION_SECONDS)
                backend_execution(arn).status = "RUNNING"
                self.world.injected["foreign execution redriven"] += 1
        for handle in self.world.expired_in_flight():
            # A handle that fails belongs to a message deleted or received again since (or
            # to the other lane's queue, or the gate's).
            gate_queue = [] if self.gate_run is None else [(self.gate_run.entry["queue_url"], "")]
            for queue_url, _ in queues(self) + gate_queue:
                with contextlib.suppress(self.sqs.exceptions.ClientError):
                    self.sqs.change_message_visibility(
                        QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0
                    )


def run_scenario(scenario: Scenario, middleware: FaultyAws) -> Outcome:
    """Run one scenario against the faulty emulator behind ``middleware``."""
    return ScenarioRun(scenario, middleware).run()
