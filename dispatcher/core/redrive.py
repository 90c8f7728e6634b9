"""Redrive jobs: whether the redrive a job asks for is still to do, done, or not knowable yet."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from dispatcher.core.admission import Redrive
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS
from dispatcher.core.executions import ACTIVE_STATUSES, REDRIVABLE_STATUSES

REDRIVE_TOKEN_LENGTH = 64


class RedriveVerdict(StrEnum):
    """What to do with a redrive job."""

    REDRIVE = "redrive"
    """Call `RedriveExecution`."""
    DONE = "done"
    """It was redriven already (by this job before a crash, or by someone else): the job is done."""
    WAIT = "wait"
    """The read is older than the one the job was made from (eventual consistency): ask later."""
    REFUSE = "refuse"
    """The job can never be done: dead-letter it with the reason."""


@dataclass(frozen=True)
class RedriveDecision:
    """A verdict, and for ``REFUSE`` the reason the job is dead-lettered with."""

    verdict: RedriveVerdict
    reason: str = ""


def redrive_decision(status: str | None, redrive_count: int, start: Redrive, now: float) -> RedriveDecision:
    """What to do with a redrive job, given what `DescribeExecution` says ``now``.

    An execution `DescribeExecution` doesn't know yet may be one that started less than
    a minute ago (a quick failure, re-run at once): it is waited for until the job is
    ``RECENT_START_WINDOW_SECONDS`` old, as the job was sent after the execution started.
    """
    expected = start.redrive_count
    if status is None:
        sent_at = start.message.sent_at
        if sent_at is not None and now - sent_at <= RECENT_START_WINDOW_SECONDS:
            return RedriveDecision(RedriveVerdict.WAIT)
        return RedriveDecision(RedriveVerdict.REFUSE, f"redrive: no execution named {start.name!r}")
    if redrive_count > expected or status == "PENDING_REDRIVE":
        return RedriveDecision(RedriveVerdict.DONE)
    if redrive_count < expected or status in ACTIVE_STATUSES:
        # Older than the read the job was made from (RUNNING at the same count is the
        # run that failed, before it failed): the list and Describe lag. Ask again later.
        return RedriveDecision(RedriveVerdict.WAIT)
    if status not in REDRIVABLE_STATUSES:
        return RedriveDecision(
            RedriveVerdict.REFUSE, f"redrive: execution {start.name!r} is {status}, which can't be redriven"
        )
    return RedriveDecision(RedriveVerdict.REDRIVE)


def redrive_token(execution_arn: str, redrive_count: int) -> str:
    """`RedriveExecution`'s ``clientToken``: the same for every attempt at one redrive (kept 15 min)."""
    digest = hashlib.sha256(execution_arn.encode()).hexdigest()
    return f"dispatcher-{redrive_count}-{digest}"[:REDRIVE_TOKEN_LENGTH]
