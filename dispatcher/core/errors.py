"""What can go wrong in a tick, in the domain's words.

Adapters translate botocore's ``ClientError`` codes into these, so the service
decides on meaning (stop the tick, dead-letter, release) and never on strings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

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
NOT_AN_OBJECT = ("model_type", "dict_type")
"""Pydantic's errors for a value that should be a JSON object (they name the model's class)."""


def _branch(part: object) -> bool:
    return part in UNION_BRANCHES or str(part).startswith("literal[")


def _fields(loc: Sequence[int | str]) -> tuple[str, ...]:
    """A location's fields, without the union's branches."""
    return tuple(str(part) for part in loc if not _branch(part))


def _issues(error: ValidationError) -> tuple[list[Any], set[tuple[str, ...]]]:
    """The issues to say, and the fields whose value may also be ``false`` (a union with a literal).

    A value of a union (settings, or ``false``) is said as the settings' problem.
    """
    issues = error.errors()
    settings = [
        issue for issue in issues if not any(str(part).startswith("literal[") for part in issue["loc"])
    ]
    or_false = {
        _fields(issue["loc"]) for issue in issues if any(part == "literal[False]" for part in issue["loc"])
    }
    return settings or issues, or_false


def message_of(issue: Any, *, or_false: bool = False) -> str:
    """What pydantic says of one issue (not the model class it names for a value that is not an object)."""
    if issue["type"] in NOT_AN_OBJECT:
        return "Input should be a JSON object" + (", or false" if or_false else "")
    return str(issue["msg"])


def problems(error: ValidationError, name: Callable[[str], str] = str) -> str:
    """A validation error in one line, ``field: what is wrong; …``, each field called by ``name``.

    A value of a union (settings, or ``false``) is said as the settings' problem, when it is an object.
    """
    issues, or_false = _issues(error)
    said = []
    for issue in issues:
        fields = _fields(issue["loc"])
        said.append(f"{name('.'.join(fields))}: {message_of(issue, or_false=fields in or_false)}")
    return "; ".join(said)


def error_keys(error: ValidationError) -> list[tuple[str, ...]]:
    """The fields a validation error is about, each as its path (``("lanes", "a", "paused")``)."""
    return [_fields(issue["loc"]) for issue in _issues(error)[0]]


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
