"""The command line's building blocks: a parser whose errors exit 2, argument types that say what is wrong."""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import NoReturn, Protocol, TextIO

from dispatcher.cli.config import Aws, Resources
from dispatcher.core.executions import REDRIVABLE_STATUSES
from dispatcher.core.jobs import start_by_text

RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

Handler = Callable[[argparse.Namespace, Aws, Resources, TextIO], int]
"""A command: its arguments, the AWS clients and resources; its exit status."""
Needs = Callable[[argparse.Namespace, Resources], Iterable[str]]
"""The settings (`Resources` field names) a command needs with these arguments."""
Prepare = Callable[[argparse.Namespace], list[str]]
"""Reads and checks a command's own input (files, bodies) before any AWS call; the problems found."""


class AddCommand(Protocol):
    """Adds one command to the `dispatcher` parser: name, handler, one-line summary, examples.

    ``needs`` names the settings checked before any AWS call (all missing ones are
    reported together); ``prepare`` checks the command's own input at the same time;
    ``common_options`` False: the command takes none of --stack, --region,
    --endpoint-url and --json (they don't apply to it).
    """

    def __call__(  # noqa: PLR0913 — one keyword per part of a command
        self,
        name: str,
        handler: Handler,
        summary: str,
        examples: str,
        *,
        needs: Needs | None = None,
        prepare: Prepare | None = None,
        common_options: bool = True,
    ) -> argparse.ArgumentParser:
        """The command's own parser, to add its arguments to."""
        ...


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Exit 2 with one line that says what is wrong."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def non_negative(text: str) -> int:
    """MAX: an integer >= 0."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"MAX must be an integer >= 0, not {text!r}")
    return int(text)


HIGHEST_PORT = 65_535


def port(text: str) -> int:
    """A TCP port: an integer from 0 (any free one) to 65535."""
    if not text.isdigit() or int(text) > HIGHEST_PORT:
        raise argparse.ArgumentTypeError(
            f"a port is an integer from 0 (any free one) to {HIGHEST_PORT}, not {text!r}"
        )
    return int(text)


def positive(text: str, what: str, bound: str) -> float:
    """An argument that must be a number above 0 (``what`` names it in errors, ``bound`` says the rule)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(bound)
    return value


def seconds(text: str) -> float:
    """A number of seconds above 0."""
    return positive(text, "a number of seconds", "seconds must be > 0")


def rate(text: str) -> float:
    """A rate per second above 0."""
    return positive(text, "a rate", "the rate must be > 0 per second")


def count(text: str) -> int:
    """An integer >= 1."""
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, not {text!r}")
    return int(text)


def moment(text: str) -> float:
    """``3h``, ``90m``, ``2d`` ago, or an ISO 8601 time (UTC unless it says otherwise)."""
    relative = RELATIVE.match(text.strip())
    if relative:
        return time.time() - float(relative.group(1)) * UNITS[relative.group(2)]
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (use 3h, 90m, 2d, or 2026-11-22T04:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.now().astimezone().tzinfo)
    return when.timestamp()


def deadline(text: str) -> str:
    """``--start-by``: ``30m``, ``2h``, ``1d`` from now, or an ISO 8601 time (UTC unless it says otherwise).

    As a ``StartBy`` value: ISO 8601 in UTC, to the second. A moment that has passed (``0m``,
    ``-5m``, yesterday) is refused: the job would expire unstarted.
    """
    stripped = text.strip()
    now = time.time()
    relative = RELATIVE.match(stripped.removeprefix("-"))
    if relative:
        seconds = float(relative.group(1)) * UNITS[relative.group(2)]
        at = now + (-seconds if stripped.startswith("-") else seconds)
        found = datetime.fromtimestamp(at, UTC)
    else:
        try:
            found = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a time: {text!r} (use 30m, 2h, 1d from now, or 2026-11-27T10:00:00Z)"
            ) from None
        found = found if found.tzinfo is not None else found.replace(tzinfo=UTC)
        at = found.timestamp()
    if at <= now:
        raise argparse.ArgumentTypeError(
            f"{text} has passed: the job would expire unstarted (give a moment in the future, e.g. 30m)"
        )
    return start_by_text(found)


def statuses(text: str) -> frozenset[str]:
    """A comma-separated list of failed statuses."""
    found = frozenset(part.strip().upper() for part in text.split(",") if part.strip())
    unknown = found - REDRIVABLE_STATUSES
    if not found or unknown:
        raise argparse.ArgumentTypeError(
            f"status must be among {', '.join(sorted(REDRIVABLE_STATUSES))}, not {text!r}"
        )
    return found


def parsed(text: str) -> object:
    """``3`` as 3, ``0.5`` as 0.5, ``true``/``false`` as booleans, anything else as it is (for the model)."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            continue
    return text
