"""Re-run planning: the failure spool's events, and what `dispatcher rerun` queues for each.

The failure spool is an SQS queue that an EventBridge rule fills with the status change
event of every execution that FAILED, TIMED_OUT or was ABORTED. ``dispatcher rerun``
turns each spooled failure into a job on the dispatcher's own queue, so every re-run
waits for a free slot like any other job:

- ``restart``: a new execution with the same input, under a derived name (the same
  for every attempt at one failure, so a re-run queued twice starts once), in the
  job's original message group (from the state table's start record);
- ``redrive``: a job with ``DispatchAction`` ``redrive`` and the execution's current
  ``redriveCount``; the dispatcher continues the same execution from its failed state.

A spool message is deleted only once its re-run job is on the queue; a crash in between
leaves it to come back, and the job it queues again is the same job (the same
deduplication id and name). Nothing here starts an execution, reads a clock or calls AWS.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dispatcher.core.events import STATUS_CHANGE
from dispatcher.core.executions import (
    MAX_NAME_LENGTH,
    REDRIVABLE_STATUSES,
    REDRIVE_WINDOW_SECONDS,
    ExecutionState,
)
from dispatcher.core.messages import Held, Job, group_problem

RERUN_SUFFIX = re.compile(r"-rerun-[0-9a-f]{8}$")
RESTART = "restart"
REDRIVE = "redrive"


# -- spooled failures -----------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """One execution that failed, as its status change event tells."""

    execution_arn: str
    name: str
    status: str
    error: str | None
    cause: str | None
    started_at: float
    stopped_at: float
    input: str | None
    """None when the event left it out (input and output above 248 KiB)."""
    redrive_count: int

    def as_json(self) -> dict[str, Any]:
        """The failure for ``--json``."""
        return {
            "name": self.name,
            "execution_arn": self.execution_arn,
            "status": self.status,
            "error": self.error,
            "cause": self.cause,
            "started_at": iso(self.started_at),
            "stopped_at": iso(self.stopped_at),
            "redrive_count": self.redrive_count,
        }


def parse_failure(body: str) -> Failure | None:
    """The failure a spooled status change event reports, or None for anything else."""
    try:
        event = json.loads(body)
        detail = event["detail"]
        if event.get("detail-type") != STATUS_CHANGE or detail["status"] not in REDRIVABLE_STATUSES:
            return None
        execution_input = detail.get("input")
        return Failure(
            execution_arn=str(detail["executionArn"]),
            name=str(detail["name"]),
            status=str(detail["status"]),
            error=detail.get("error"),
            cause=detail.get("cause"),
            started_at=float(detail["startDate"]) / 1000,
            stopped_at=float(detail["stopDate"]) / 1000,
            input=execution_input if isinstance(execution_input, str) else None,
            redrive_count=int(detail.get("redriveCount") or 0),
        )
    except (ValueError, TypeError, KeyError):
        return None


@dataclass(frozen=True)
class Filters:
    """Which spooled failures a command looks at."""

    statuses: frozenset[str] = REDRIVABLE_STATUSES
    error: str | None = None
    """A glob on the error name (``States.*``)."""
    name: str | None = None
    """A glob on the execution name."""
    since: float | None = None
    until: float | None = None
    """Stop time bounds (epoch seconds), inclusive."""

    def keep(self, failure: Failure) -> bool:
        """Whether ``failure`` passes every filter."""
        since = -math.inf if self.since is None else self.since
        until = math.inf if self.until is None else self.until
        return (
            failure.status in self.statuses
            and _matches(self.error, failure.error or "")
            and _matches(self.name, failure.name)
            and since <= failure.stopped_at <= until
        )


def _matches(glob: str | None, text: str) -> bool:
    """Whether ``text`` matches ``glob`` (no glob: anything does)."""
    return glob is None or fnmatch.fnmatchcase(text, glob)


@dataclass
class Spooled:
    """One failed execution and the spool messages that report it (events repeat)."""

    failure: Failure
    messages: list[Held]


def by_execution(messages: Iterable[Held]) -> tuple[list[Spooled], list[Held]]:
    """Spool messages grouped by execution (its latest failure), oldest start first; and the unreadable."""
    found: dict[str, Spooled] = {}
    unreadable: list[Held] = []
    for held in messages:
        failure = parse_failure(held.body)
        if failure is None:
            unreadable.append(held)
            continue
        spooled = found.get(failure.execution_arn)
        if spooled is None:
            found[failure.execution_arn] = Spooled(failure, [held])
            continue
        spooled.messages.append(held)
        latest = (failure.redrive_count, failure.stopped_at)
        if latest > (spooled.failure.redrive_count, spooled.failure.stopped_at):
            spooled.failure = failure
    return sorted(found.values(), key=lambda item: (item.failure.started_at, item.failure.name)), unreadable


def counts(failures: Iterable[Failure]) -> dict[str, dict[str, int]]:
    """How many failures per status and per error."""
    by_status: dict[str, int] = {}
    by_error: dict[str, int] = {}
    for failure in failures:
        by_status[failure.status] = by_status.get(failure.status, 0) + 1
        error = failure.error or "(none)"
        by_error[error] = by_error.get(error, 0) + 1
    return {"status": dict(sorted(by_status.items())), "error": dict(sorted(by_error.items()))}


# -- where a re-run goes -----------------------------------------------------------------


@dataclass(frozen=True)
class Origin:
    """What the dispatcher recorded when it started an execution (None: not recorded)."""

    group: str | None
    """The job's message group (a restart goes in it)."""
    lane: str | None
    """The lane that started it (its re-run goes back there)."""
    slots: int = 1
    """The job's size (`Slots`): its re-run takes as many."""


@dataclass(frozen=True)
class Destination:
    """The lane a failure's re-run goes back to, or why that can't be known."""

    lane: str | None
    unknown: str | None = None
    """Why no lane is known (then ``lane`` is None): the failure stays on the spool."""


def destination(recorded: str | None, lanes: Sequence[str], chosen: str | None = None) -> Destination | None:
    """Where a failure's re-run goes: the lane it came from, never a guess.

    ``recorded``: the lane the dispatcher recorded when it started the execution;
    ``lanes``: the configured lanes that start its state machine, in order; ``chosen``:
    ``--lane``. The origin is the recorded lane while it still starts that state machine,
    else the only lane that does; with several and no record, it can't be known. With
    ``--lane NAME``, only NAME's failures are taken: those it came from, and those whose
    origin can't be known but whose state machine NAME starts (they go to NAME). None:
    not one of ``--lane``'s failures.
    """
    if recorded in lanes:
        origin: str | None = recorded
    else:
        origin = lanes[0] if len(lanes) == 1 else None
    if chosen is not None:
        return Destination(chosen) if origin == chosen or (origin is None and chosen in lanes) else None
    if origin is not None:
        return Destination(origin)
    if not lanes:
        return Destination(None, "no configured lane starts its state machine")
    return Destination(
        None,
        f"started by one of the lanes {', '.join(lanes)} (they start the same state machine) and no"
        f" record says which: re-run it with --lane NAME",
    )


# -- planning a re-run ------------------------------------------------------------------


def restart_name(name: str, execution_arn: str) -> str:
    """The derived name of a restart: the base name, ``-rerun-`` and 8 hex digits of the failed ARN.

    The same failure always derives the same name (a re-run queued twice starts once);
    a restart of a restart replaces the suffix rather than growing it, and the name
    stays within 80 characters.
    """
    suffix = f"-rerun-{hashlib.sha256(execution_arn.encode()).hexdigest()[:8]}"
    base = RERUN_SUFFIX.sub("", name)[: MAX_NAME_LENGTH - len(suffix)]
    return base + suffix


def default_group(execution_arn: str) -> str:
    """The message group of a re-run whose original group is unknown: one of its own."""
    return f"rerun-{hashlib.sha256(execution_arn.encode()).hexdigest()[:16]}"


@dataclass
class Rerun:
    """What ``rerun`` does with one failed execution."""

    spooled: Spooled
    mode: str
    job: Job | None = None
    group_source: str = ""
    """recorded (the state table), option (``--group``) or default (a group of its own)."""
    skip: str | None = None
    """Why nothing is queued."""
    resolved: bool = False
    """Skipped because nothing is left to do: its spool messages go."""
    redrive_count: int = 0
    """The execution's redriveCount now: which failure of it this re-run is for."""
    lane: str | None = None
    """The lane it goes back to (None: it can't be known, and it is skipped)."""

    def as_json(self) -> dict[str, Any]:
        """The plan for ``--json``."""
        document: dict[str, Any] = {"name": self.spooled.failure.name, "mode": self.mode, "lane": self.lane}
        if self.job is not None:
            document |= {
                "job_name": self.job.name,
                "group": self.job.group,
                "group_source": self.group_source,
                "deduplication_id": self.job.message_deduplication_id(),
            }
            if self.job.redrive_count is not None:
                document["redrive_count"] = self.job.redrive_count
        if self.skip is not None:
            document["skipped"] = self.skip
        return document


def _moved_on(failure: Failure, state: ExecutionState | None) -> tuple[str, bool] | None:
    """Why an execution is not re-run now, and whether that is for good: it ran again, or a read lags."""
    if state is None:
        return None
    if state.redrive_count > failure.redrive_count and state.status not in REDRIVABLE_STATUSES:
        return f"{state.status} since: redriven after this failure", True
    if state.redrive_count < failure.redrive_count or state.status not in REDRIVABLE_STATUSES:
        # DescribeExecution is eventually consistent: it may not show the failure yet.
        return f"Step Functions still shows it {state.status}: run this again in a minute", False
    return None


def _plan_redrive(  # noqa: PLR0913, PLR0917 — each is one input of the plan
    rerun: Rerun,
    state: ExecutionState | None,
    execution_input: str | None,
    group: str,
    now: float,
    slots: int | None = None,
) -> None:
    """The redrive job of ``rerun``, or why there is none."""
    failure = rerun.spooled.failure
    if state is None:
        rerun.skip = "Step Functions no longer has this execution: use --restart"
        return
    if now - failure.stopped_at > REDRIVE_WINDOW_SECONDS:
        rerun.skip = "stopped more than 14 days ago, too late to redrive: use --restart"
        return
    digest = hashlib.sha256(failure.execution_arn.encode()).hexdigest()[:32]
    rerun.job = Job(
        body=execution_input or "{}",
        group=group,
        name=failure.name,
        deduplication_id=f"redrive-{state.redrive_count}-{digest}",
        redrive_count=state.redrive_count,
        slots=slots,
    )


def plan_rerun(  # noqa: PLR0913, PLR0917 — each is one input of the plan
    spooled: Spooled,
    mode: str,
    state: ExecutionState | None,
    group: tuple[str, str],
    now: float,
    slots: int = 1,
) -> Rerun:
    """Decide one re-run from what Step Functions says of the execution now.

    ``group``: the message group and where it came from. An execution redriven since
    that runs again or succeeded has nothing left to re-run; one that a lagging read
    doesn't show failed yet is left for a later run. A redrive takes the execution's
    current ``redriveCount`` (what the dispatcher checks before it redrives). Either keeps
    the job's size (``slots``, as recorded when it started).
    """
    sized = slots if slots > 1 else None
    failure = spooled.failure
    rerun = Rerun(
        spooled,
        mode,
        group_source=group[1],
        redrive_count=failure.redrive_count if state is None else state.redrive_count,
    )
    moved = _moved_on(failure, state)
    if moved is not None:
        rerun.skip, rerun.resolved = moved
        return rerun
    execution_input = (state.input if state is not None else None) or failure.input
    if mode == REDRIVE:
        _plan_redrive(rerun, state, execution_input, group[0], now, sized)
        return rerun
    if execution_input is None:
        rerun.skip = "its input is not available (left out of the event, and not readable)"
        return rerun
    name = restart_name(failure.name, failure.execution_arn)
    rerun.job = Job(body=execution_input, group=group[0], name=name, slots=sized)
    return rerun


def choose_group(execution_arn: str, recorded: str | None, option: str | None) -> tuple[str, str]:
    """The re-run's message group and its source: ``--group``, else the recorded one, else its own."""
    if option is not None:
        return option, "option"
    if recorded is not None and group_problem(recorded) is None:
        return recorded, "recorded"
    return default_group(execution_arn), "default"


def iso(moment: float) -> str:
    """An epoch time as ISO 8601 in UTC, to the second."""
    return datetime.fromtimestamp(int(moment), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
