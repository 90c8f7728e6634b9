"""Gates: what a request and a release are, what an admission says, and who is still inside.

A gate is a section of a workflow: an execution enters it by sending a *request* (its task
token and its execution ARN) to the gate's FIFO queue from a
``sqs:sendMessage.waitForTaskToken`` task, and waits there at no cost until the dispatcher
*admits* it with `SendTaskSuccess`; it leaves by sending a *release*, or by ending. Each
execution inside holds one place in the gate's pool. The dispatcher records every
admission (the execution's name and a digest of its token) before it makes it, and the
record is its place until a release, an end, or a check with Step Functions says the
execution left. Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dispatcher.core.admission import DeadLetter, Start
from dispatcher.core.counting import LIST_LAG_SECONDS, RecordedStart, RunningListing
from dispatcher.core.events import EXECUTION_ARN, GATE_KEY, Release
from dispatcher.core.executions import ACTIVE_STATUSES, execution_name, name_problem, state_machine_of
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.tenants import Hold

TOKEN_KEY, EXECUTION_KEY = "token", "execution"
"""A request's keys: the task token (``$$.Task.Token``) and the execution ARN (``$$.Execution.Id``)."""
MAX_TOKEN_LENGTH = 2048
"""`SendTaskSuccess` takes a token of 1 to 2,048 characters."""
CHECK_AFTER_SECONDS = 30.0
"""An execution inside this long since its admission (or since Step Functions last said it
runs) is checked with Step Functions: one that ended without a release or an event that
reached the dispatcher leaves within this, the check's pace and AWS's own lag."""
RECONCILE_SECONDS = 30.0
"""How often a gate's roster is reconciled with a whole listing of its state machine's RUNNING
executions (when `ListExecutions`' pace allows): an execution inside that ended without a
word is freed within AWS's list lag, this and the listing's own pace, however many are
inside. Checks one at a time (`CHECK_AFTER_SECONDS`) are bounded by `DescribeExecution`'s
quota, 15 a second: 3,000 inside for ten minutes need 100."""
RECONCILE_MAX_AGE_SECONDS = 60.0
"""A roster not reconciled for this long is listed whether the pace has tokens or not: every
lane's count spends the same pace a page at a time, and would else keep a listing of many
pages waiting. The pace then waits out what it owes (the lanes reuse their listings)."""


def token_digest(token: str) -> str:
    """What the state table keeps of a task token: enough to tell two tokens apart, not the token."""
    return hashlib.sha256(token.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class GateRequest:
    """An execution asks to enter a gate: its task token and its ARN."""

    token: str
    execution_arn: str

    @property
    def name(self) -> str:
        """The execution's name."""
        return execution_name(self.execution_arn)


def read_request(body: str, state_machine_arn: str) -> GateRequest | str:
    """The request a message body is, or why it can't be one (then it is poison).

    A JSON object with ``"token"`` and ``"execution"`` strings (other keys are ignored),
    the execution one of the gate's state machine: a request from another workflow could
    never be checked against Step Functions, so it is not admitted.
    """
    try:
        document: Any = json.loads(body)
    except ValueError as error:
        return f"a gate request must be JSON: {error}"
    token = document.get(TOKEN_KEY) if isinstance(document, dict) else None
    execution = document.get(EXECUTION_KEY) if isinstance(document, dict) else None
    if not isinstance(token, str) or not isinstance(execution, str):
        return (
            f'a gate request must be a JSON object with the strings "{TOKEN_KEY}" ($$.Task.Token)'
            f' and "{EXECUTION_KEY}" ($$.Execution.Id)'
        )
    problem = _request_problem(token, execution, state_machine_arn)
    return GateRequest(token, execution) if problem is None else problem


def _request_problem(token: str, execution: str, state_machine_arn: str) -> str | None:
    if not 0 < len(token) <= MAX_TOKEN_LENGTH:
        return f"the task token is {len(token)} characters: SendTaskSuccess takes 1 to {MAX_TOKEN_LENGTH}"
    if not EXECUTION_ARN.match(execution) or name_problem(execution_name(execution)) is not None:
        return f"{execution!r} is not an execution ARN"
    if state_machine_of(execution) != state_machine_arn:
        return f"execution {execution} is not one of the gate's state machine {state_machine_arn}"
    return None


def plan_request(message: QueuedMessage, state_machine_arn: str) -> Start | DeadLetter:
    """Admit the execution a request names (its name, its token), or dead-letter a malformed one."""
    request = read_request(message.body, state_machine_arn)
    if isinstance(request, str):
        return DeadLetter(message, request)
    return Start(message, request.name, token=request.token)


def once_a_round(
    plan: Callable[[QueuedMessage], Start | DeadLetter],
) -> Callable[[QueuedMessage], Start | DeadLetter | None]:
    """``plan``, holding back a request for an execution an earlier request of the round names.

    Its record is keyed by the execution: one round writes it once. The later request
    waits for the next round, which finds the execution inside.
    """
    seen: set[str] = set()

    def planned(message: QueuedMessage) -> Start | DeadLetter | None:
        decision = plan(message)
        if isinstance(decision, Start):
            if decision.name in seen:
                return None
            seen.add(decision.name)
        return decision

    return planned


def admission_output(gate: str, now: float) -> str:
    """What `SendTaskSuccess` hands the execution: the gate's name and when it was admitted (ISO 8601)."""
    admitted_at = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
    return json.dumps({GATE_KEY: gate, "admitted_at": admitted_at.replace("+00:00", "Z")})


def release_problem(release: Release, gates: Mapping[str, str]) -> str | None:
    """Why a release frees nothing before it is looked up: an unknown gate, another state machine's execution.

    ``gates``: each gate's name → its state machine.
    """
    machine = gates.get(release.gate)
    if machine is None:
        return f"no gate is called {release.gate!r}"
    if state_machine_of(release.execution_arn) != machine:
        return (
            f"execution {release.execution_arn} is not one of gate {release.gate}'s state machine {machine}"
        )
    return None


@dataclass(frozen=True)
class Confirmation:
    """Admissions of one round that `SendTaskSuccess` took, written once its calls were made."""

    key: str
    confirmed_at: float
    names: frozenset[str]


def confirmed(
    records: Iterable[RecordedStart], confirmations: Sequence[Confirmation]
) -> tuple[list[RecordedStart], list[str]]:
    """The records, each marked confirmed when a confirmation as late as it names it; the stale confirmations.

    A confirmation is stale once none of its executions has a record it confirms (they
    left, or entered again since): its item can go.
    """
    latest: dict[str, float] = {}
    for confirmation in confirmations:
        for name in confirmation.names:
            latest[name] = max(latest.get(name, -math.inf), confirmation.confirmed_at)
    marked = [
        record.model_copy(update={"confirmed": latest.get(record.name, -math.inf) >= record.recorded_at})
        for record in records
    ]
    admitted_at = {record.name: record.recorded_at for record in marked}
    stale = [
        confirmation.key
        for confirmation in confirmations
        if not any(
            admitted_at.get(name, math.inf) <= confirmation.confirmed_at for name in confirmation.names
        )
    ]
    return marked, stale


@dataclass(frozen=True)
class InsideRead:
    """A gate's items as read: its admissions (each marked confirmed or not), its stale confirmations."""

    records: list[RecordedStart]
    stale: list[str]
    """Keys of confirmations that confirm no admission any more."""
    held: tuple[Hold, ...] = ()
    """The member's jobs held for their group's limit, one a group at most."""


@dataclass(frozen=True)
class Inside:
    """A gate's records as one tick reads them: who is still inside, who left by ending."""

    inside: tuple[RecordedStart, ...]
    ended: tuple[RecordedStart, ...] = ()
    """Admitted before the end a status change event reports: the place is free (forget the record)."""


def plan_inside(records: Iterable[RecordedStart], ends: Mapping[str, float]) -> Inside:
    """Who is inside: every admission recorded, unless its execution ended after it was admitted.

    ``ends``: execution name → the latest stop a status change event reported. An end
    before the admission is an earlier run's (the execution was redriven and entered
    again): the place stays.
    """
    inside: list[RecordedStart] = []
    ended: list[RecordedStart] = []
    for record in records:
        stopped_at = ends.get(record.name)
        if stopped_at is not None and stopped_at >= record.recorded_at:
            ended.append(record)
        else:
            inside.append(record)
    return Inside(tuple(inside), tuple(ended))


def due_checks(
    inside: Iterable[RecordedStart], checked: Mapping[str, float], now: float
) -> list[RecordedStart]:
    """Executions inside long enough to ask Step Functions whether they still run, longest first.

    ``checked``: name → when Step Functions last said it runs.
    """
    due = [
        (max(record.recorded_at, checked.get(record.name, -math.inf)), record)
        for record in inside
        if max(record.recorded_at, checked.get(record.name, -math.inf)) + CHECK_AFTER_SECONDS <= now
    ]
    return [record for _, record in sorted(due, key=lambda pair: pair[0])]


def absent_from(inside: Iterable[RecordedStart], listing: RunningListing) -> list[RecordedStart]:
    """The executions inside that a whole listing of RUNNING should show and doesn't: they ended.

    Only those admitted at least `LIST_LAG_SECONDS` before the listing was read: an
    execution starts before it asks to enter, so by then the list shows it while it runs.
    One the list still shows after it ended (the other lag) keeps its place until a later
    listing, its event or a check. A redriven execution is listed again: it keeps its place.
    """
    if not listing.complete:
        return []
    return [
        record
        for record in inside
        if record.name not in listing.executions
        and record.recorded_at + LIST_LAG_SECONDS <= listing.listed_at
    ]


def still_inside(status: str | None) -> bool:
    """Whether a checked execution keeps its place: it runs, or no read shows it yet (a lag)."""
    return status is None or status in ACTIVE_STATUSES


def oldest_inside_seconds(inside: Collection[RecordedStart], now: float) -> float | None:
    """How long the longest-inside execution has been inside (None: nobody is)."""
    if not inside:
        return None
    return round(max(0.0, now - min(record.recorded_at for record in inside)), 3)
