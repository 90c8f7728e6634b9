"""Following and cancelling jobs: what `dispatcher job` / `dispatcher cancel` and the producer client share.

A job is named by its execution name within a lane. Its state is its execution's when one
exists, else what the dispatcher kept of it (cancelled, expired, dead-lettered), else held
(for its group's limit), else "not started".

**Why a ``cancelled`` answer is true while ticks run.** A tick reads the pending
cancellations with its review window, once, after it took the tick lease and before it
records or starts anything; a round never starts a job they name. A cancellation written
after that read is not seen by the tick in flight, so ``cancel`` writes its entry, then
waits for the tick in flight to end: it asks the lease's keeper for another tick (as an
invocation that finds the lease held does) and waits until the keeper took that ask (it
does so only between ticks), let go, or its time ran out. Every tick after that one reads
the entry. Only then does ``cancel`` look for the execution: none means no tick started the
job and none ever will (``cancelled``); one means the tick in flight started it first
(``already started``, and the entry is taken back). The wait is the rest of one tick:
usually well under a second, at most the function's timeout when its keeper died.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from dispatcher.adapters.control import ControlParameter
from dispatcher.adapters.jobs import JobTable
from dispatcher.adapters.lane_roster import LaneRosterTable
from dispatcher.adapters.lease import TickLease
from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.core.control import steer
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.executions import REDRIVABLE_STATUSES, name_problem
from dispatcher.core.jobs import (
    CANCELLED_ERROR,
    ExecutionFacts,
    GroupCancellation,
    JobRecord,
    JobReport,
    JobState,
    job_report,
)
from dispatcher.core.lanes import parse_lanes
from dispatcher.core.messages import group_problem
from dispatcher.core.rerun import restart_name
from dispatcher.core.topology import DEFAULT, Lane, Topology

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_stepfunctions import SFNClient

FOLLOW_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5}, user_agent_extra="dispatcher-producer"
)
RACE_POLL_SECONDS = 1.0
"""How often ``cancel`` asks again for an execution a start record says may not show yet."""
CANCELLED = "cancelled"
STOPPED = "stopped"
ALREADY_STARTED = "already started"


class UnknownLaneError(ValueError):
    """The lane named isn't one of the dispatcher's (or it is a gate's name: gates take no part)."""


@dataclass(frozen=True)
class CancelAnswer:
    """What ``cancel`` did: ``cancelled``, ``stopped`` or ``already started`` (with the execution)."""

    word: str
    name: str
    lane: str
    execution: ExecutionFacts | None = None
    reason: str | None = None
    seen: bool = True
    """Whether the dispatcher had seen a job of that name (a cancelled one: else, cancelled in advance)."""

    def as_json(self) -> dict[str, object]:
        """``{"name", "lane", "answer", ...}`` for ``--json``."""
        document: dict[str, object] = {"name": self.name, "lane": self.lane, "answer": self.word}
        if self.execution is not None:
            document["execution_arn"] = self.execution.arn
            document["status"] = self.execution.status
        if self.reason is not None:
            document["reason"] = self.reason
        if self.word == CANCELLED:
            document["seen"] = self.seen
        return document


@dataclass(frozen=True)
class AskedCancel:
    """A cancellation asked for: written (``execution`` None), or not, since the job's execution exists."""

    name: str
    lane: Lane
    reason: str
    execution: ExecutionFacts | None
    seen: bool = True
    """Whether the dispatcher knew of a job of that name: a record of it, or it held for its group."""
    at: float = 0.0
    """When its cancellation was written (which hour's item keeps it)."""

    @property
    def written(self) -> bool:
        """Whether its cancellation was written (the job had no execution yet)."""
        return self.execution is None


class Jobs:
    """One dispatcher's jobs: follow one, cancel one, cancel a message group's."""

    def __init__(  # noqa: PLR0913 — the clients, the table, the lanes, and time
        self,
        dynamodb: DynamoDBClient,
        stepfunctions: SFNClient,
        table: str,
        topology: Topology,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._dynamodb = dynamodb
        self._stepfunctions = stepfunctions
        self._table = table
        self._topology = topology
        self._key = topology.default_lane.state_machine_arn
        self._records = JobTable(dynamodb, table, self._key)
        self._clock = clock
        self._sleep = sleep

    def lane(self, name: str | None) -> Lane:
        """Lane ``name`` (None: ``default``); `UnknownLaneError` for one the dispatcher hasn't."""
        wanted = name or DEFAULT
        if wanted in self._topology.names(Lane):
            return self._topology.member(wanted, Lane)
        if wanted in self._topology.names():
            kind = self._topology.member(wanted).kind
            raise UnknownLaneError(
                f"{wanted} is a {kind}, not a lane: jobs are followed and cancelled on lanes"
            )
        known = ", ".join(self._topology.names(Lane))
        raise UnknownLaneError(f"no such lane: {wanted} (lanes: {known})")

    def _machine(self, lane: Lane) -> StateMachine:
        return StateMachine(self._stepfunctions, lane.state_machine_arn)

    def job(self, name: str, lane: str | None = None) -> JobReport:
        """The one state of job ``name`` of the lane, with what is known of it.

        A name no execution can have (empty, a space) is a ``ValueError``, as `cancel`'s is.
        """
        problem = name_problem(name)
        if problem is not None:
            raise ValueError(f"not a job's name: {problem}")
        member = self.lane(lane)
        machine = self._machine(member)
        execution = machine.facts(name)
        record = self._records.record(member.name, name)
        rerun_as = _rerun_as(machine, name, execution)
        held_at = None
        if execution is None and record is None:
            held_at = self._held_at(member, name)
        dropped = None
        if execution is None and record is not None and record.state is JobState.CANCELLED:
            dropped = self._records.dropped(member.name, name)
        report = job_report(
            name,
            member.name,
            execution=execution,
            record=record,
            held_at=held_at,
            rerun_as=rerun_as,
            dropped=dropped,
        )
        if execution is None:
            return report
        return replace(report, slots=self._slots(member, name, execution.started_at))

    def _slots(self, member: Lane, name: str, started_at: float | None) -> int:
        """An execution's size as its start record keeps it (1: none, or no size)."""
        if started_at is None:
            return 1
        ledger = StartLedgerTable(self._dynamodb, self._table, self._key)
        origin = ledger.origins({name: started_at}, member.state_machine_arn).get(name)
        return 1 if origin is None else origin.slots

    def _held_at(self, member: Lane, name: str) -> float | None:
        """When job ``name`` was held for its group's limit, if it is held now."""
        roster = LaneRosterTable(self._dynamodb, self._table, self._key).read(member)
        return next((hold.held_at for hold in roster.held if hold.name == name), None)

    def cancel(
        self, name: str, lane: str | None = None, reason: str | None = None, *, stop: bool = False
    ) -> CancelAnswer:
        """Cancel ``name``: it never starts (``cancelled``), or it had (``already started``, ``stopped``)."""
        asked = self.ask_cancel(name, lane, reason)
        if asked.written:
            self.await_tick_in_flight()
        return self.answer_cancel(asked, stop=stop)

    def ask_cancel(self, name: str, lane: str | None = None, reason: str | None = None) -> AskedCancel:
        """The first half of `cancel`: the job's cancellation written, unless its execution exists."""
        problem = name_problem(name)
        if problem is not None:
            raise ValueError(f"not a job's name: {problem}")
        member = self.lane(lane)
        execution = self._machine(member).facts(name)
        if execution is not None:
            return AskedCancel(name, member, reason or "cancelled by its producer", execution)
        known = self._records.record(member.name, name)
        if reason is None and known is not None and known.state is JobState.CANCELLED:
            reason = known.reason  # cancelled again: its first reason stays
        reason = reason or "cancelled by its producer"
        seen = known is not None or self._held_at(member, name) is not None
        now = self._clock()
        self._records.cancel(JobRecord(member.name, name, JobState.CANCELLED, reason, now))
        return AskedCancel(name, member, reason, None, seen, now)

    def answer_cancel(self, asked: AskedCancel, *, stop: bool = False) -> CancelAnswer:
        """The second half of `cancel`, once the tick in flight at the first has ended."""
        name, member, reason = asked.name, asked.lane, asked.reason
        machine = self._machine(member)
        execution = asked.execution or self._started(machine, name)
        if execution is None:
            return CancelAnswer(CANCELLED, name, member.name, reason=reason, seen=asked.seen)
        if asked.written:
            # The tick in flight started it before it could read the cancellation.
            self._records.withdraw(member.name, name, asked.at)
        if stop and execution.status == "RUNNING":
            machine.stop(name, CANCELLED_ERROR, reason)
            now = self._clock()
            stopped = JobRecord(member.name, name, JobState.CANCELLED, reason, now, stopped=True)
            self._records.write([stopped])
            aborted = replace(execution, status="ABORTED", stopped_at=now, error=CANCELLED_ERROR)
            return CancelAnswer(STOPPED, name, member.name, aborted, reason)
        earlier = self._records.record(member.name, name) if execution.status == "ABORTED" else None
        if earlier is not None and earlier.stopped:
            # Stopped by an earlier cancel: cancelling twice is no error.
            return CancelAnswer(STOPPED, name, member.name, execution, earlier.reason)
        return CancelAnswer(ALREADY_STARTED, name, member.name, execution)

    def _started(self, machine: StateMachine, name: str) -> ExecutionFacts | None:
        """The job's execution, if a tick started it; None when none did, and none ever will.

        `DescribeExecution` is eventually consistent: an execution started a moment ago may
        not show yet. A tick records a start before it calls `StartExecution`: while the
        review window holds a record of this name (voided or not: a record is voided when
        its execution ended, as when it was never tried), it is asked again, until the
        execution shows or the record is older than any lag (then no start was made).
        """
        ledger = StartLedgerTable(self._dynamodb, self._table, self._key)
        while True:
            execution = machine.facts(name)
            if execution is not None:
                return execution
            window = ledger.window(self._clock() - RECENT_START_WINDOW_SECONDS)
            if not any(
                start.name == name and start.state_machine_arn == machine.arn for start in window.recorded
            ):
                return None
            self._sleep(RACE_POLL_SECONDS)

    def cancel_group(
        self, group: str, lane: str | None = None, reason: str | None = None
    ) -> GroupCancellation:
        """Cancel message group ``group``'s jobs sent until now, not started; its later ones start."""
        problem = group_problem(group)
        if problem is not None:
            raise ValueError(f"not a message group: {problem}")
        member = self.lane(lane)
        cancellation = GroupCancellation(group, self._clock(), reason or f"message group {group} cancelled")
        self._records.cancel_group(member.name, cancellation)
        self.await_tick_in_flight()
        return cancellation

    def await_tick_in_flight(self) -> None:
        """Return once the tick in flight now (if any) has ended: every later tick reads what was written."""
        TickLease(self._dynamodb, self._table, self._key).await_tick_in_flight(
            "cancel", self._clock, self._sleep
        )


def jobs_from_settings(queue_url: str, settings: Mapping[str, str | None]) -> Jobs:
    """The jobs of the dispatcher whose lane ``default`` takes ``queue_url``, from its settings.

    ``settings``: ``state_table``, ``state_machine_arn``, ``dead_letter_queue_url``, and
    optionally ``lanes`` and ``control_parameter`` (the function's variables). Raises
    ``ValueError`` naming what is missing, or what is wrong with ``LANES``.
    """
    required = ("state_table", "state_machine_arn", "dead_letter_queue_url")
    missing = [key.upper() for key in required if not settings.get(key)]
    if missing:
        raise ValueError(
            f"following and cancelling jobs needs {', '.join(missing)}: pass them to Producer()"
            " (state_table=..., ...) or set them in the environment"
        )
    default = Lane(
        name=DEFAULT,
        pool=DEFAULT,
        queue_url=queue_url,
        dead_letter_queue_url=str(settings["dead_letter_queue_url"]),
        state_machine_arn=str(settings["state_machine_arn"]),
    )
    try:
        topology = parse_lanes(settings.get("lanes"), default, 0)
        name = settings.get("control_parameter")
        if name:
            ssm = boto3.client("ssm", config=FOLLOW_CONFIG)
            topology = steer(topology, ControlParameter(name, client=ssm).read(), name)
    except ConfigurationError as error:
        raise ValueError(str(error)) from error
    dynamodb = boto3.client("dynamodb", config=FOLLOW_CONFIG)
    stepfunctions = boto3.client("stepfunctions", config=FOLLOW_CONFIG)
    return Jobs(dynamodb, stepfunctions, str(settings["state_table"]), topology)


def _rerun_as(machine: StateMachine, name: str, execution: ExecutionFacts | None) -> str | None:
    """The name of the execution `rerun --restart` made of this one, if it made one."""
    if execution is None or execution.status not in REDRIVABLE_STATUSES:
        return None
    derived = restart_name(name, execution.arn)
    return derived if machine.facts(derived) is not None else None
