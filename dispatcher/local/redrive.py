"""`RedriveExecution` as AWS answers it, for any store of executions (moto's, or a test world's).

moto has no `RedriveExecution`. This is the one emulation of it: the local emulator
applies it to moto's executions, and the fault harness and the in-memory AWS to their
own. A FAILED, TIMED_OUT or ABORTED execution that stopped less than 14 days ago runs
again under the same name and ARN; a ``clientToken`` seen in the last 15 minutes answers
as before and redrives nothing; any other execution is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dispatcher.core.executions import CLIENT_TOKEN_SECONDS, REDRIVABLE_STATUSES, REDRIVE_WINDOW_SECONDS

OK = 200
REFUSED = 400


@dataclass(frozen=True)
class Stopped:
    """What the store says of an execution: its status and, once closed, when it stopped."""

    status: str
    stopped_at: float | None


@dataclass(frozen=True)
class RedriveAnswer:
    """The HTTP status and JSON body AWS answers with."""

    status: int
    document: dict[str, Any]
    repeated: bool = False
    """A client token seen before: nothing was redriven."""

    @property
    def ok(self) -> bool:
        """The redrive happened (or had happened, for a repeated token)."""
        return self.status == OK


def _refused(code: str, message: str) -> RedriveAnswer:
    return RedriveAnswer(REFUSED, {"__type": code, "message": message})


@dataclass
class Redrives:
    """The client tokens of recent redrives; `redrive` applies AWS's rules."""

    tokens: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Client token → (when it was used, the redriveDate it answered)."""

    def redrive(
        self,
        arn: str,
        client_token: str | None,
        now: float,
        stopped: Callable[[str], Stopped | None],
        run_again: Callable[[str], None],
    ) -> RedriveAnswer:
        """Redrive execution ``arn``: ``stopped`` reads it (None: none such), ``run_again`` redrives it."""
        self.tokens = {
            token: seen for token, seen in self.tokens.items() if now - seen[0] < CLIENT_TOKEN_SECONDS
        }
        if client_token and client_token in self.tokens:
            return RedriveAnswer(OK, {"redriveDate": self.tokens[client_token][1]}, repeated=True)
        execution = stopped(arn)
        if execution is None:
            return _refused("ExecutionDoesNotExist", f"Execution Does Not Exist: '{arn}'")
        if execution.status not in REDRIVABLE_STATUSES or execution.stopped_at is None:
            return _refused(
                "ExecutionNotRedrivable",
                f"Execution is {execution.status}: only FAILED, TIMED_OUT or ABORTED can be redriven",
            )
        if now - execution.stopped_at > REDRIVE_WINDOW_SECONDS:
            return _refused("ExecutionNotRedrivable", "Execution stopped more than 14 days ago")
        run_again(arn)
        if client_token:
            self.tokens[client_token] = (now, now)
        return RedriveAnswer(OK, {"redriveDate": now})
