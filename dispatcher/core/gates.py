"""Gates: what a request and a release are, and what an admission says.

A gate is a section of a workflow: an execution enters it by sending a *request* (its task
token and its execution ARN) to the gate's FIFO queue from a
``sqs:sendMessage.waitForTaskToken`` task, and waits there at no cost until the dispatcher
*admits* it with `SendTaskSuccess`; it leaves by sending a *release*, or by ending. Each
execution inside holds one place in the gate's pool, an entry of the gate's roster
(`dispatcher.core.rosters`). Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dispatcher.core.admission import DeadLetter, Start
from dispatcher.core.events import EXECUTION_ARN, GATE_KEY, Release
from dispatcher.core.executions import execution_name, name_problem, state_machine_of
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.rosters import RosterEntry

TOKEN_KEY, EXECUTION_KEY = "token", "execution"
"""A request's keys: the task token (``$$.Task.Token``) and the execution ARN (``$$.Execution.Id``)."""
MAX_TOKEN_LENGTH = 2048
"""`SendTaskSuccess` takes a token of 1 to 2,048 characters."""


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


@dataclass(frozen=True, kw_only=True)
class Enter(Start):
    """Admit execution ``name`` into the gate with this task token (`SendTaskSuccess`)."""

    token: str


def entering(starts: Sequence[Start]) -> list[Enter]:
    """A gate's admissions of a round, as its requests planned them (each an `Enter`)."""
    found = [start for start in starts if isinstance(start, Enter)]
    if len(found) != len(starts):
        raise TypeError("a gate admits only what its requests planned (Enter)")
    return found


def plan_request(message: QueuedMessage, state_machine_arn: str) -> Enter | DeadLetter:
    """Admit the execution a request names (its name, its token), or dead-letter a malformed one."""
    request = read_request(message.body, state_machine_arn)
    if isinstance(request, str):
        return DeadLetter(message, request)
    return Enter(message=message, name=request.name, token=request.token)


def once_a_round(
    plan: Callable[[QueuedMessage], Enter | DeadLetter],
) -> Callable[[QueuedMessage], Enter | DeadLetter | None]:
    """``plan``, holding back a request for an execution an earlier request of the round names.

    Its record is keyed by the execution: one round writes it once. The later request
    waits for the next round, which finds the execution inside.
    """
    seen: set[str] = set()

    def planned(message: QueuedMessage) -> Enter | DeadLetter | None:
        decision = plan(message)
        if isinstance(decision, Enter):
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


class GateEntry(RosterEntry):
    """An execution admitted into a gate: the task token it was admitted with, and whether that was seen."""

    token: str
    """A digest of the task token (`dispatcher.core.gates.token_digest`)."""
    confirmed: bool = False
    """`SendTaskSuccess` was seen to take it before its request was deleted. An unconfirmed one
    may have its request back on the gate's queue."""


def admissions(entries: Iterable[RosterEntry]) -> list[GateEntry]:
    """A gate's entries (every entry a gate's roster holds is an admission)."""
    return [entry for entry in entries if isinstance(entry, GateEntry)]


@dataclass(frozen=True)
class Confirmation:
    """Admissions of one round that `SendTaskSuccess` took, written once its calls were made."""

    key: str
    confirmed_at: float
    names: frozenset[str]


def confirmed(
    entries: Iterable[RosterEntry], confirmations: Sequence[Confirmation]
) -> tuple[list[RosterEntry], list[str]]:
    """The entries, each admission marked confirmed when a confirmation as late names it; the stale ones.

    A confirmation is stale once none of its executions has an entry it confirms (they
    left, or entered again since): its item can go.
    """
    latest: dict[str, float] = {}
    for confirmation in confirmations:
        for name in confirmation.names:
            latest[name] = max(latest.get(name, -math.inf), confirmation.confirmed_at)
    marked = [
        entry.model_copy(update={"confirmed": latest.get(entry.name, -math.inf) >= entry.recorded_at})
        if isinstance(entry, GateEntry)
        else entry
        for entry in entries
    ]
    admitted_at = {entry.name: entry.recorded_at for entry in marked}
    stale = [
        confirmation.key
        for confirmation in confirmations
        if not any(
            admitted_at.get(name, math.inf) <= confirmation.confirmed_at for name in confirmation.names
        )
    ]
    return marked, stale
