"""One generated scenario, run: the real handler against the faulty emulator, then the end checked.

`run_scenario` drives the real handler against the faulty emulator: a scheduled tick at
each step of the schedule and, between them, a tick for every status change event the
emulated EventBridge delivers, each tick a cold start or a warm one. First with faults
on, then with faults and events off until the queue drains (liveness must not depend on
best-effort events). It returns an `Outcome`: what was processed, what was injected, and
every violation of the invariants in DESIGN.md (`tests.faults.checks`).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import uuid
from typing import Any

import boto3

from dispatcher import handler
from dispatcher.core.control import Control
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS
from dispatcher.core.executions import execution_arn
from dispatcher.core.outcomes import total_keys
from dispatcher.core.rerun import REDRIVE, RESTART
from dispatcher.core.topology import DEFAULT
from dispatcher.core.topology import GATE as GATE_KIND
from dispatcher.core.topology import LANE as LANE_KIND
from dispatcher.local.account import REGION, environment
from dispatcher.local.stack import Stack, create_stack, read_all
from dispatcher.settings import variable
from tests.faults.batches import EndEventBatches
from tests.faults.checks import check_end_state, crossing_names
from tests.faults.gates import GATE, GateRun
from tests.faults.lanes import LANE, LaneRun
from tests.faults.operator import (
    STALE_MEMBER,
    expire_holds,
    forget_stale_key,
    leave_stale_key,
    run_rerun,
)
from tests.faults.process import TICK_SECONDS, DispatcherProcess, on_virtual_time
from tests.faults.scenario import (
    ADVICE,
    CONTROL_OVERRIDE,
    MAX_DURATION_SECONDS,
    MAX_LAG_SECONDS,
    Job,
    Scenario,
)
from tests.faults.tally import FINISHED, Outcome
from tests.faults.tenants import LONG_SECONDS
from tests.support.crashes import CRASH_POINTS, CrashPlan
from tests.support.faulty_aws import (
    VISIBILITY_TIMEOUT_SECONDS,
    FaultyAws,
    backend_execution,
)
from tests.support.runs import Execution, execution_event
from tests.support.world import World


class ScenarioRun:
    """One scenario against one emulator: send, tick, advance time, then check."""

    def __init__(self, scenario: Scenario, middleware: FaultyAws) -> None:
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
        self._crossing = crossing_names(scenario.jobs)
        if scenario.tenants is not None:
            limits = {DEFAULT: scenario.tenants.default_limit, LANE: scenario.tenants.lane_limit}
            self.world.groups.limits = {lane: limit for lane, limit in limits.items() if limit is not None}
        self.process = DispatcherProcess(clock=self.world.time).install()
        self.batches = EndEventBatches(
            self.world, random.Random(f"{scenario.seed}:batches"), self.stack.state_machine_arn
        )
        self.outcome = Outcome(scenario)
        self.event_ticks = 0
        self.warm_ticks = 0
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
            **(
                {}
                if self.lanes_document() is None
                else {variable("lanes"): json.dumps(self.lanes_document())}
            ),
            **overrides,
        }

    def lanes_document(self) -> dict[str, Any] | None:
        """``LANES``: the second lane and the gate, each with its pool (None: neither)."""
        parts = [
            *([] if self.lane_run is None else [json.loads(self.lane_run.lanes_variable())]),
            *([] if self.gate_run is None else [self.gate_run.lanes_document()]),
        ]
        if not parts:
            return None
        return {
            "pools": {name: pool for part in parts for name, pool in part.get("pools", {}).items()},
            "lanes": [lane for part in parts for lane in part.get("lanes", [])],
            "gates": [gate for part in parts for gate in part.get("gates", [])],
        }

    @property
    def queues(self) -> list[tuple[str, str]]:
        """(job queue, dead-letter queue) of each lane, default first."""
        found = [(self.stack.queue_url, self.stack.dead_letter_queue_url)]
        if self.lane is not None:
            found.append((self.lane["queue_url"], self.lane["dead_letter_queue_url"]))
        return found

    def run(self) -> Outcome:
        """Fault phase, then a quiet phase until drained, then the checks."""
        with on_virtual_time(self.world, self.advance), environment(self.environment()):
            for tick in range(self.scenario.fault_ticks):
                for job in self.scenario.jobs:
                    if job.arrives == tick:
                        self.send(job)
                self._start_external(tick)
                self._misdirect(tick)
                if tick in self.scenario.reruns:
                    self._rerun(self.scenario.reruns[tick])
                self._tick(tick)
                self.advance(self.scenario.intervals[tick])
            self.outcome.executions_in_fault_phase = self._dispatcher_executions()
            self._drain()
            self._rerun_what_failed()
            if self.gate_run is not None:
                self._settle_gate()
            self._forget_stale_keys()
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
        return job.message_id

    def tick(self, event: Any = None, *, cold: bool = True, **overrides: str) -> dict[str, Any]:
        """One tick with the function's environment (and overrides), on the virtual clock."""
        with on_virtual_time(self.world, self.advance), environment(self.environment(**overrides)):
            report = self.process.tick(event=event, cold=cold)
        assert report is not None
        return report

    def _start_external(self, tick: int) -> None:
        seconds = self.scenario.external.get(tick)
        if seconds is not None:
            self.sfn.start_execution(
                stateMachineArn=self.stack.state_machine_arn,
                name=f"external-{tick}",
                input=json.dumps({"seconds": seconds}),
            )
            redrive_after = self.scenario.redrives.get(tick)
            if redrive_after is not None:
                arn = execution_arn(self.stack.state_machine_arn, f"external-{tick}")
                self.redrive_after[arn] = redrive_after

    def _rerun(self, crash: CrashPlan | None, mode: str | None = None) -> None:
        """The operator runs `dispatcher rerun`; killed, its held spool messages come back later.

        With ``rerun_switch``, the runs after the first killed one are in the other mode;
        failures an earlier run queued the other way are skipped, and the operator then
        does as the skip says (runs that mode once).
        """
        mode = mode or self.rerun_mode
        self.modes_used.add(mode)
        if mode != self.scenario.rerun_mode:
            self.outcome.rerun_switches += 1
        result, sent = run_rerun(mode, crash)
        self.outcome.reruns += 1
        if result.crashed and self.scenario.rerun_switch:
            self.rerun_mode = REDRIVE if self.scenario.rerun_mode == RESTART else RESTART
        refusals = [
            match.group(1)
            for skipped in result.skipped
            if (match := ADVICE.search(skipped.get("skipped", ""))) is not None
        ]
        self.outcome.rerun_refused += len(refusals)
        for entry in sent:
            attributes = {
                key: value["StringValue"] for key, value in entry.get("MessageAttributes", {}).items()
            }
            self.rerun_queues.setdefault(attributes["ExecutionName"], set()).add(entry["QueueUrl"])
            if "RedriveCount" in attributes:
                self.redrive_jobs.add((attributes["ExecutionName"], int(attributes["RedriveCount"])))
            else:
                self.restart_jobs.add(attributes["ExecutionName"])
        self.outcome.rerun_jobs += len(result.queued)
        if result.crashed:
            self.outcome.rerun_crashes += 1
            expire_holds(self.stack.spool_queue_url)
        elif result.exit_status != 0:
            # An AWS error that outlived the CLI's retries: the operator runs it again later.
            self.world.injected["`dispatcher rerun` failed on AWS errors"] += 1
        for other in sorted(set(refusals) - {mode}):
            if mode == self.rerun_mode:  # not from inside an advised run
                self._rerun(None, other)

    def _forget_stale_keys(self) -> None:
        """The operator removes each stale key `status` would list: `forget` takes it, once."""
        for kind in self.scenario.stale.values():
            status, printed = forget_stale_key(kind)
            forgotten = json.loads(printed).get("forgotten", {}) if status == 0 else {}
            if f"{kind}.{STALE_MEMBER}" not in forgotten:
                self.outcome.violations.append(f"forget --{kind} {STALE_MEMBER}: exit {status}, {printed!r}")

    def _spooled(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.stack.spool_queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def _rerun_what_failed(self) -> None:
        """The outage is over: re-run whatever is spooled, and drain, until nothing failed is left."""
        self.world.outage_until = 0.0
        for _ in range(3):
            expire_holds(self.stack.spool_queue_url)
            if not self._spooled():
                return
            self._rerun(None)
            self._drain()
        if self._spooled():
            self.outcome.violations.append(f"loss: {self._spooled()} spooled failure(s) never re-run")

    def _misdirect(self, tick: int) -> None:
        """An event that must change nothing: for another state machine, or a RUNNING status."""
        kind = self.scenario.misdirected.get(tick)
        running = [execution for execution in self.world.running() if execution.by_dispatcher]
        if kind is None or not running:
            return
        execution = self.rng.choice(running)
        if kind == "other machine":
            event = execution_event(execution, "SUCCEEDED", self.stack.state_machine_arn + "-other")
            event["detail"]["stopDate"] = int(self.world.now * 1000)
        else:
            event = execution_event(execution, "RUNNING")
        self.world.injected[f"misdirected event ({kind})"] += 1
        self._tick(None, event=event)

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
        # A tick that waits (a loop's pause, a holder waiting for the next ask) lets
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
            for queue_url, _ in self.queues + gate_queue:
                with contextlib.suppress(self.sqs.exceptions.ClientError):
                    self.sqs.change_message_visibility(
                        QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0
                    )

    def _drain(self) -> None:
        """Faults and events off: wait out visibility timeouts and recorded starts, then tick to the end."""
        self.world.faults.quiet()
        self.world.events.enabled = False
        self.world.deliveries.clear()
        # Someone else's redrive during the drain would start an execution the list can't
        # show yet, and the exact count below could not be checked.
        self.redrive_after.clear()
        self.redrives.clear()
        if self.lane_run is not None:
            self.lane_run.resume(self.ssm, self.stack.control_parameter, self.world)
            handler.reset_clients()  # the control parameter's cache (5 s) is long expired by the end
            self.lane_run.read_afresh(self.world)
        if self.gate_run is not None:
            self.gate_run.resume(self.ssm, self.stack.control_parameter)
            handler.reset_clients()
        tenants = self.scenario.tenants
        longest = LONG_SECONDS if tenants is not None and tenants.long_jobs else MAX_DURATION_SECONDS
        # What ran in the fault phase has ended, and the list has stopped showing it.
        self.advance(
            max(VISIBILITY_TIMEOUT_SECONDS + RECENT_START_WINDOW_SECONDS, longest) + MAX_LAG_SECONDS + 1
        )
        left = self._visible_messages()
        # One tick per MAX messages, one to see the queue empty, one spare; and one more per
        # name collision, which waits a tick if DescribeExecution doesn't show the original yet.
        collisions = sum(job.poison == "name collision" for job in self.scenario.jobs)
        bound = math.ceil(left / self.scenario.max_concurrency) + 2 + collisions
        if self.lane_run is not None and self.lane_run.limited():
            # Each quiet tick starts at most the lane's own limit of its jobs: its MAX, its
            # pool's, one bucket of its rate (it refills in between).
            bound += math.ceil(sum(self.queue_counts(self.lane)) / self.lane_run.limit())
        if self.gate_run is not None:
            # Each quiet tick admits at most the gate's limit of its waiting executions.
            bound += (
                math.ceil(self.gate_run.waiting() / self.gate_run.limit(self.scenario.max_concurrency)) + 1
            )
        # A repeat sent to the other lane of the same machine: when both lanes receive its name
        # in one round, the second lane's copy and its group wait a round (`LaneStarts.to_record`),
        # and that lane's round may find nothing else to do ("waiting").
        crossing = 0 if self.scenario.lane is None else len(self.scenario.lane.crossing)
        bound += crossing
        waited = 0
        if tenants is not None and (tenants.default_limit or tenants.lane_limit):
            # A group at its limit starts no more in a tick: at least one job a tick still starts.
            bound += left
        settle = longest + MAX_LAG_SECONDS + 1
        for _ in range(bound):
            running = self._truly_running()
            waiting = 0 if self.gate_run is None else self.gate_run.waiting()
            report = self._tick(None)
            if report is None:
                return
            # An admission recorded by a tick that died before its call holds a place until its
            # request comes back: a waiting execution may be counted (never one that left).
            if not running <= report["running"] <= running + waiting:
                self.outcome.violations.append(
                    f"leak: with faults off the tick counted {report['running']} RUNNING, truly {running}"
                    + (f" and {waiting} waiting at the gate" if waiting else "")
                )
            waited += report["stopped"] == "waiting"
            if report["stopped"] not in {"capacity", "drained", "throttled", "waiting"} or waited > crossing:
                self.outcome.violations.append(f"liveness: a quiet tick stopped with {report['stopped']!r}")
            self.advance(settle)
            if report["stopped"] == "drained" and self._visible_messages() == 0:
                return
        self.outcome.violations.append(
            f"liveness: {left} message(s) not drained within {bound} quiet ticks"
            f" at MAX {self.scenario.max_concurrency}"
        )

    def _settle_gate(self) -> None:
        """Once every gated execution ended, a quiet tick counts no one inside and leaves no admission."""
        assert self.gate_run is not None
        self.advance(MAX_DURATION_SECONDS + MAX_LAG_SECONDS + 1)
        report = self._tick(None)
        inside = None if report is None else report["gates"][GATE]["inside"]
        if inside != 0 or self.gate_run.recorded():
            self.outcome.violations.append(
                f"leak: once every gated execution ended, the tick counted {inside} inside the gate,"
                f" and the state table still holds {self.gate_run.recorded()}"
            )

    def _truly_running(self) -> int:
        """What a quiet tick must count: the lanes' executions, and who is inside the gate (not who waits)."""
        if self.gate_run is None:
            return len(self.world.running())
        lanes = [
            execution
            for execution in self.world.running()
            if not execution.arn.startswith(self.gate_run.prefix)
        ]
        return len(lanes) + self.gate_run.inside()

    def queue_counts(self, lane: dict[str, Any] | None = None) -> tuple[int, int]:
        """(visible, in flight) messages on the source queue (or on ``lane``'s)."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.stack.queue_url if lane is None else lane["queue_url"],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]), int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def _visible_messages(self) -> int:
        """Messages on the lanes' queues and the gate's (visible or in flight)."""
        gate = (
            0
            if self.gate_run is None
            else sum(self.queue_counts({"queue_url": self.gate_run.entry["queue_url"]}))
        )
        return (
            sum(self.queue_counts()) + (0 if self.lane is None else sum(self.queue_counts(self.lane))) + gate
        )

    def dead_letters(self) -> dict[str, list[dict[str, Any]]]:
        """Every DLQ message (deleted once read), by its deduplication id (the source MessageId).

        Each message's ``Lane`` says whose DLQ held it (None: lane default's).
        """
        letters: dict[str, list[dict[str, Any]]] = {}
        for lane, (_, dead_letter_url) in zip([None, LANE], self.queues, strict=False):
            for message in read_all(dead_letter_url, self.sqs):
                message["Lane"] = lane
                letters.setdefault(message["Attributes"]["MessageDeduplicationId"], []).append(message)
        return letters


def run_scenario(scenario: Scenario, middleware: FaultyAws) -> Outcome:
    """Run one scenario against the faulty emulator behind ``middleware``."""
    return ScenarioRun(scenario, middleware).run()
