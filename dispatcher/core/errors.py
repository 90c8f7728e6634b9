"""What can go wrong in a tick, in the domain's words.

Adapters translate botocore's ``ClientError`` codes into these, so the service
decides on meaning (stop the tick, dead-letter, release) and never on strings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import ValidationError


class DispatcherError(Exception):
    """Base class of the dispatcher's own errors."""


class ConfigurationError(DispatcherError):
    """The deployment is wrong: the tick stops loudly and every message stays queued."""


class TransientError(DispatcherError):
    """AWS is still throttling or failing after botocore's retries: stop admitting now."""


class RejectedInputError(DispatcherError):
    """Step Functions refused this message's name or input: it can never start."""


class ExecutionExistsError(DispatcherError):
    """An execution with this name already exists and is closed (or has another input)."""


class TokenRefusedError(DispatcherError):
    """Step Functions refused a task token (`TaskTimedOut`, `TaskDoesNotExist`, `InvalidToken`).

    Its task is closed: it timed out, its execution ended, or the token was used already.
    """

    def __init__(self, message: str, *, retried: bool = False) -> None:
        super().__init__(message)
        self.retried = retried
        """The refusal answered a retry: an earlier attempt, its answer lost, may have taken the token."""


class NotYetError(DispatcherError):
    """What this message needs can't be told yet (a read lags): its group waits, the others go on."""


UNION_BRANCHES = ("AdaptiveDocument",)
"""How pydantic names a union's branch in a location: not a field, so left out of the one the user reads."""


def problems(error: ValidationError, name: Callable[[str], str] = str) -> str:
    """A validation error in one line, ``field: what is wrong; …``, each field called by ``name``.

    A value of a union (settings, or ``false``) is said as the settings' problem, when it is an object.
    """
    issues = error.errors()
    settings = [
        issue for issue in issues if not any(str(part).startswith("literal[") for part in issue["loc"])
    ]
    return "; ".join(
        f"{name('.'.join(str(part) for part in issue['loc'] if part not in UNION_BRANCHES))}: {issue['msg']}"
        for issue in settings or issues
    )


def location(loc: Sequence[int | str]) -> str:
    """A validation error's location as the contract writes it: ``lanes[1].queue_url``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def field_problem(loc: Sequence[int | str], message: str) -> str:
    """One problem as ``field: what is wrong`` (a bad name of a pool: ``pools.<name>: the name …``)."""
    message = message.removeprefix("Value error, ")
    message = f"{message[:1].lower()}{message[1:]}"
    if loc and loc[-1] == "[key]":
        loc, message = loc[:-1], f"the name: {message}"
    return f"{location(loc) or 'value'}: {message}"
