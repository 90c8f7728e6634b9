"""`dispatcher local`: the embedded AWS emulator with a dispatcher stack (the ``local`` extra).

The emulator lives in `dispatcher.local`, which is local-only: the Lambda artifact leaves
it out, and nothing shipped imports it. This command finds it at run time, by name.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import re
from collections.abc import Sequence
from typing import Any, TextIO, cast

from dispatcher import install_hint
from dispatcher.cli.args import AddCommand, non_negative, port
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.errors import CliError, UsageError
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.lanes_document import NAME_PATTERN
from dispatcher.core.topology import DEFAULT
from dispatcher.settings import TEMPLATE_GATE

LOCAL_MODULES = (
    "moto",
    "flask",
    "requests",
    "openapi_spec_validator",
    "cfnlint",
    "joserfc",
    "graphql",
    "yaml",
    "aws_lambda_powertools",
)
"""What `dispatcher local` needs beyond the package (the `local` extra)."""
MEMBERS = "dispatcher.local.members"
"""Where a ``--lanes`` file is checked (local code: imported only when `dispatcher local` runs)."""
EMULATOR = "dispatcher.local.command"
DEFAULT_STACK = "dispatcher-local"


def command_local(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Start the embedded emulator with a stack; print what to export; serve until interrupted."""
    missing = [module for module in LOCAL_MODULES if importlib.util.find_spec(module) is None]
    if missing:
        raise CliError(
            f"`dispatcher local` needs the emulator ({', '.join(missing)} missing): {install_hint('local')}"
        )
    emulator = importlib.import_module(EMULATOR)
    try:
        return int(
            emulator.serve(
                port=args.port,
                stack=args.stack_name or args.stack or DEFAULT_STACK,
                max_concurrency=args.max,
                wait_seconds=args.wait_seconds,
                schedule_seconds=args.schedule,
                lanes=args.lane or [],
                gate=args.gate,
                document=args.lanes_document,
                out=out,
            )
        )
    except ConfigurationError as error:  # what the lanes name breaks a rule of LANES: said before it is ready
        where = f"--lanes {args.lanes}: " if args.lanes else ""
        raise UsageError(f"{where}{error}") from None
    except KeyboardInterrupt:  # Ctrl-C is how it stops: not a failure (`make local` stays quiet)
        out.write("\nStopped. The emulator's state is gone.\n")
        return 0


class LaneOptions(argparse.Action):
    """``--lane``, repeatable: each lane once (a name given twice is a usage error, not a failed start)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        """Add one lane; a name given twice, or the name of ``--gate``'s gate, is refused at once."""
        name, priority = cast("tuple[str, int]", values)
        given: list[tuple[str, int]] = list(getattr(namespace, self.dest, None) or [])
        if any(name == earlier for earlier, _ in given):
            parser.error(f"argument {option_string}: lane {name} is given twice")
        setattr(namespace, self.dest, [*given, (name, priority)])


def lane_option(text: str) -> tuple[str, int]:
    """``NAME[=PRIORITY]``: a lane's name and priority."""
    name, _, priority = text.partition("=")
    if not re.fullmatch(NAME_PATTERN, name) or name == DEFAULT:
        raise argparse.ArgumentTypeError(
            f"a lane is NAME[=PRIORITY], NAME {NAME_PATTERN} and not default: {text!r}"
        )
    try:
        return name, int(priority or 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"PRIORITY must be an integer: {text!r}") from None


def prepare_local(args: argparse.Namespace) -> list[str]:
    """`dispatcher local` serves its own endpoint: the options that point at one don't apply.

    A ``--lanes`` file is read here: a file that can't be read, or isn't a JSON object, is a
    usage error before the emulator starts.
    """
    args.lanes_document = None
    problems = _read_lanes(args)
    if args.lanes_document is not None and not problems:
        problems += _check_lanes(args)
    if args.gate and any(name == TEMPLATE_GATE for name, _ in args.lane or []):
        problems.append(
            f"--lane {TEMPLATE_GATE}: --gate's gate is called {TEMPLATE_GATE}: give the lane another name"
        )
    given = [
        option
        for option, value in (
            ("--region", args.region),
            ("--endpoint-url", args.endpoint_url),
            ("--json", args.json),
        )
        if value
    ]
    if given:
        problems.append(
            f"`dispatcher local` takes none of --region, --endpoint-url, --json (given: {', '.join(given)})"
        )
    return problems


def _check_lanes(args: argparse.Namespace) -> list[str]:
    """The ``--lanes`` file checked as the function checks ``LANES``, before the emulator starts (no wait)."""
    if any(importlib.util.find_spec(module) is None for module in LOCAL_MODULES):
        return []  # said by the command itself, with how to install the emulator
    members = importlib.import_module(MEMBERS)
    try:
        members.check_members(
            args.stack_name or args.stack or DEFAULT_STACK,
            lanes=args.lane or [],
            document=args.lanes_document,
        )
    except ConfigurationError as error:
        return [f"--lanes {args.lanes}: {error}"]
    return []


def _read_lanes(args: argparse.Namespace) -> list[str]:
    """Read ``--lanes FILE`` into ``args.lanes_document``; the problems found."""
    if args.lanes is None:
        return []
    try:
        with open(args.lanes, encoding="utf-8") as stream:
            document = json.load(stream)
    except OSError as error:
        return [f"--lanes: cannot read {args.lanes}: {error.strerror}"]
    except ValueError as error:
        return [f"--lanes {args.lanes}: LANES: not JSON: {error}"]
    if not isinstance(document, dict):
        return [f'--lanes {args.lanes}: LANES: must be a JSON object like {{"pools": {{}}, "lanes": []}}']
    args.lanes_document = document
    return []


def register(command: AddCommand) -> None:
    """Add `local`."""
    local = command(
        "local",
        command_local,
        "Start the embedded AWS emulator with a dispatcher stack, and print what to export to use it.",
        "  dispatcher local                       # then, in another shell, the printed exports\n"
        "  dispatcher local --port 4567 --max 3 --schedule 10\n"
        "  dispatcher local --schedule 0     # no ticks but the ones you run (the docs' outputs)\n"
        "  dispatcher local --lane urgent=10  # a second lane into the same state machine and pool\n"
        "  dispatcher local --gate            # gate 'gate' on a sample gated workflow, in pool default\n"
        "  dispatcher local --lanes lanes.json --schedule 0   # the pools, lanes and gates of a LANES file\n",
        prepare=prepare_local,
        common_options=False,
    )
    local.add_argument(
        "--port", type=port, default=4567, help="emulator port on 127.0.0.1 (4567; 0: any free one)"
    )
    local.add_argument(
        "--stack",
        "--stack-name",
        dest="stack_name",
        metavar="NAME",
        help=f"the emulated stack's name ({DEFAULT_STACK})",
    )
    local.add_argument("--max", type=non_negative, default=5, help="MAX of the emulated stack (5)")
    local.add_argument("--wait-seconds", type=int, default=5, help="how long each sample execution runs (5)")
    members = local.add_mutually_exclusive_group()
    members.add_argument(
        "--lanes",
        metavar="FILE",
        help="serve the pools, lanes and gates of this LANES file, creating the queues and (sample)"
        " state machines it names",
    )
    members.add_argument(
        "--lane",
        action=LaneOptions,
        type=lane_option,
        metavar="NAME[=PRIORITY]",
        help="add a lane into the same state machine and pool (repeatable; priority 0 unless given)",
    )
    local.add_argument(
        "--gate",
        action="store_true",
        help="add gate 'gate' in pool default, guarding the section of a sample gated workflow",
    )
    local.add_argument(
        "--schedule",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="tick every SECONDS, like the schedule (10; 0: never)",
    )
