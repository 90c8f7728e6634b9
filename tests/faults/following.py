"""Producers that follow, cancel and bound their jobs, under the faults: the plan, the acts, the checks.

A scenario may draw (from its own stream, so the rest of it is drawn as before):

- cancellations of single jobs, each by the producer client's own code (`dispatcher.following`):
  some between ticks (the whole `cancel`), some while a tick is in flight — the first half
  (the job's execution looked for, its cancellation written) at a chosen call of the tick
  (after its round's records are written, before a start, after a receive, before a delete),
  the second half (wait for the tick in flight, then look again) once the tick returned or
  died, as a producer's call that began during the tick ends after it;
- a message group cancelled (a tenant that leaves);
- deadlines: ``StartBy`` on some jobs, a few seconds to minutes after they are sent, and
  sometimes a ``MAX_WAIT_SECONDS`` for lane default.

The world then checks the four rules of DESIGN.md's "Jobs: follow, cancel, bound": a job
answered ``cancelled`` never starts; an expired job never starts; a job is expired only by a
receive after its deadline; and every job ends as exactly one of started, cancelled,
expired or dead-lettered (the loss and duplicate checks count the cancelled and expired
ones out, and nothing else).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3

from dispatcher.core.messages import parse_start_by
from dispatcher.core.topology import DEFAULT, Lane, Pool, Topology
from dispatcher.following import AskedCancel, Jobs
from dispatcher.local.account import REGION

if TYPE_CHECKING:
    from tests.faults.jobs import Job
    from tests.faults.run import ScenarioRun
    from tests.support.runs import Execution

ROUND_POINTS = (
    ("dynamodb.BatchWriteItem:record", "after"),
    ("states.StartExecution", "before"),
    ("sqs.ReceiveMessage", "after"),
    ("sqs.DeleteMessageBatch", "before"),
)
"""Where in a tick a producer's cancellation is written: around a round's records and calls."""
START_BY_SECONDS = (0.0, 3.0, 20.0, 60.0, 300.0)
"""How long after its send a job's ``StartBy`` falls."""


@dataclass
class FollowPlan:
    """What the producer does to follow, cancel and bound its jobs (lane default's only)."""

    cancels: dict[int, list[str]] = field(default_factory=dict)
    """Tick → keys of jobs cancelled (the whole call) before it."""
    in_round: dict[int, tuple[str, str, int, list[str]]] = field(default_factory=dict)
    """Tick → (operation, before/after, nth call, job keys): cancelled while that tick runs."""
    group_cancels: dict[int, str] = field(default_factory=dict)
    """Tick → a message group cancelled before it."""
    start_by: dict[str, float] = field(default_factory=dict)
    """Job key → seconds after its send its ``StartBy`` falls."""
    max_wait_seconds: int | None = None

    def describe(self) -> str:
        """One line for a violation's report."""
        return (
            f"follow: {sum(map(len, self.cancels.values()))} cancelled between ticks,"
            f" {sum(len(keys) for *_, keys in self.in_round.values())} during a tick,"
            f" groups {sorted(self.group_cancels.values())}, {len(self.start_by)} StartBy,"
            f" MAX_WAIT_SECONDS {self.max_wait_seconds}"
        )


def plan_follow(rng: random.Random, jobs: list[Job], fault_ticks: int) -> FollowPlan | None:
    """Cancellations and deadlines for about a third of scenarios (None: the producer does neither)."""
    if rng.random() >= 0.35:
        return None
    plan = FollowPlan()
    ours = [job for job in jobs if job.lane is None and job.poison is None]
    for job in ours:
        draw = rng.random()
        if draw < 0.15:
            plan.cancels.setdefault(rng.randrange(job.arrives, fault_ticks + 1), []).append(job.key)
        elif draw < 0.3:
            tick = rng.randrange(job.arrives, fault_ticks)
            point = plan.in_round.get(tick) or (*rng.choice(ROUND_POINTS), rng.randint(1, 2), [])
            point[3].append(job.key)
            plan.in_round[tick] = point
        if rng.random() < 0.15:
            plan.start_by[job.key] = rng.choice(START_BY_SECONDS)
    groups = sorted({job.group for job in ours})
    if groups and rng.random() < 0.3:
        plan.group_cancels[rng.randrange(fault_ticks)] = rng.choice(groups)
    if rng.random() < 0.25:
        plan.max_wait_seconds = rng.choice([30, 120, 600])
    return plan


@dataclass
class Answered:
    """A producer's cancellation, answered."""

    key: str
    name: str
    word: str
    during_round: bool


@dataclass
class GroupCancelled:
    """A message group cancelled: its jobs sent until ``before``, not started by the answer, never start."""

    group: str
    before: float
    started_then: set[str]


@dataclass
class Following:
    """One scenario's producer side of following and cancelling, and what it was answered."""

    run: ScenarioRun
    plan: FollowPlan
    answered: list[Answered] = field(default_factory=list)
    groups: list[GroupCancelled] = field(default_factory=list)
    asked: list[tuple[str, AskedCancel]] = field(default_factory=list)
    """First halves written during the tick in flight, waiting for their second half."""

    def jobs(self) -> Jobs:
        """The producer client's own code, on clients the faults leave alone, on the virtual clock."""
        run = self.run
        default = Lane(
            name=DEFAULT,
            pool=DEFAULT,
            queue_url=run.stack.queue_url,
            dead_letter_queue_url=run.stack.dead_letter_queue_url,
            state_machine_arn=run.stack.state_machine_arn,
        )
        topology = Topology(pools=(Pool(DEFAULT, run.scenario.max_concurrency),), members=(default,))
        # A session of its own: the default one carries the dispatcher's hooks (its crashes).
        dynamodb = boto3.session.Session().client("dynamodb", region_name=REGION)
        return Jobs(
            dynamodb, run.sfn, run.stack.state_table, topology, clock=run.world.time, sleep=run.advance
        )

    def before_tick(self, tick: int) -> None:
        """The cancellations planned before this tick: each job's whole call, then a group's."""
        jobs = self.jobs()
        for key in self.plan.cancels.get(tick, []):
            job = self._job(key)
            if job.message_id:
                answer = jobs.cancel(job.execution_name)
                self.answered.append(Answered(key, job.execution_name, answer.word, during_round=False))
        group = self.plan.group_cancels.get(tick)
        if group is not None:
            cancellation = jobs.cancel_group(group)
            started = {execution.name for execution in self._ours()}
            self.groups.append(GroupCancelled(group, cancellation.before, started))

    def during(self, tick: int) -> tuple[str, str, int, Any] | None:
        """The act to run at a call of this tick: the first halves of its planned cancellations."""
        planned = self.plan.in_round.get(tick)
        if planned is None:
            return None
        operation, when, nth, keys = planned

        def ask() -> None:
            jobs = self.jobs()
            for key in keys:
                job = self._job(key)
                if job.message_id:
                    self.asked.append((key, jobs.ask_cancel(job.execution_name)))

        return operation, when, nth, ask

    def after_tick(self) -> None:
        """The second halves of what was asked during the tick: it has ended (returned, or died)."""
        if not self.asked:
            return
        jobs = self.jobs()
        jobs.await_tick_in_flight()
        for key, asked in self.asked:
            answer = jobs.answer_cancel(asked)
            self.answered.append(Answered(key, asked.name, answer.word, during_round=True))
        self.asked.clear()

    def _job(self, key: str) -> Job:
        return next(job for job in self.run.scenario.jobs if job.key == key)

    def _ours(self) -> list[Execution]:
        return [execution for execution in self.run.world.executions.values() if execution.by_dispatcher]

    # -- the checks ---------------------------------------------------------------------

    def never_started(self) -> set[str]:
        """Names that must have no execution: answered ``cancelled``, or a cancelled group's unstarted ones.

        A group's job whose name a message sent after the cancellation carries too (a repeat),
        or a message of the other lane, may start by that message: it is left out.
        """
        sent_at = self.run.world.sent_at
        # A name a job of the other lane carries too is that lane's job there: it may start.
        other_lanes = {job.execution_name for job in self.run.scenario.jobs if job.lane is not None}
        names = {answer.name for answer in self.answered if answer.word == "cancelled"} - other_lanes
        for cancelled in self.groups:
            later = other_lanes | {
                job.execution_name
                for job in self.run.scenario.jobs
                if sent_at.get(job.message_id, cancelled.before + 1) > cancelled.before
            }
            names |= {
                job.execution_name
                for job in self.run.scenario.jobs
                if job.lane is None
                and job.group == cancelled.group
                and job.message_id in sent_at
                and job.execution_name not in cancelled.started_then | later
            }
        return names

    def in_cancelled_group(self, job: Job) -> bool:
        """Whether a message group's cancellation took this job (lane default's, sent before it).

        Poison of that group may be dropped instead of dead-lettered, and a re-run job sent
        in it before the cancellation is dropped too: either way it never starts.
        """
        sent = self.run.world.sent_at.get(job.message_id)
        return job.lane is None and any(
            cancelled.group == job.group and (sent is None or sent <= cancelled.before)
            for cancelled in self.groups
        )

    def check(self, ours: dict[str, Execution], expired: dict[str, str]) -> list[str]:
        """The rules: cancelled never starts, expired never starts, expired only after its deadline.

        ``expired``: message id → the ``DispatchError`` of its expired dead letter.
        """
        violations = [
            f"cancel: {name} was answered cancelled (or its group was) and started"
            for name in sorted(self.never_started() & ours.keys())
        ]
        names = {job.message_id: job for job in self.run.scenario.jobs}
        for message_id, reason in expired.items():
            job = names.get(message_id)
            if job is None:
                continue
            deadline = self.deadline_of(job)
            received = self.run.world.received.get(message_id, [])
            if deadline is None:
                violations.append(f"expiry: {job.key} had no deadline and was expired: {reason}")
            elif not received or received[-1] <= deadline:
                violations.append(
                    f"expiry: {job.key} expired by a receive at {received[-1:]}, deadline {deadline}"
                )
            repeats = [
                other for other in self.run.scenario.jobs if other.execution_name == job.execution_name
            ]
            if job.execution_name in ours and len(repeats) == 1:
                violations.append(f"expiry: {job.key} expired and started")
        return violations

    def deadline_of(self, job: Job) -> float | None:
        """The job's deadline as sent: the earlier of its ``StartBy`` and the lane's bound, or None."""
        sent = self.run.world.sent_at.get(job.message_id)
        if sent is not None:
            sent = int(sent * 1000) / 1000  # its SentTimestamp, in milliseconds
        deadlines = []
        start_by = job.attributes.get("StartBy", {}).get("StringValue")
        if start_by is not None:
            deadlines.append(parse_start_by(start_by))
        if self.plan.max_wait_seconds is not None and job.lane is None and sent is not None:
            deadlines.append(sent + self.plan.max_wait_seconds)
        return min(deadlines, default=None)


def follow_figures(following: Following, expired: int) -> dict[str, int]:
    """What became of one scenario's cancellations and deadlines (`tests.faults.tally.FOLLOW_FIGURES`)."""
    between = [answer for answer in following.answered if not answer.during_round]
    during = [answer for answer in following.answered if answer.during_round]
    return {
        "jobs cancelled between ticks": len(between),
        "  of them answered cancelled": sum(answer.word == "cancelled" for answer in between),
        "jobs cancelled while a tick was in flight": len(during),
        "  answered cancelled (never started)": sum(answer.word == "cancelled" for answer in during),
        "message groups cancelled": len(following.groups),
        "jobs with a StartBy": len(following.plan.start_by),
        "jobs expired (dead-lettered, expired:)": expired,
        "  answered already started (the tick won)": sum(answer.word != "cancelled" for answer in during),
    }
