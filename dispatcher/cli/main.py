"""The `dispatcher` command: its parser (every command's help and examples) and its exit statuses.

It behaves like the AWS CLI: configuration from ``--stack NAME`` (the stack's outputs)
or from the function's own environment variables, ``--endpoint-url`` (or
``AWS_ENDPOINT_URL``) for an emulator, ``--json`` for scripts, exit status 0 on
success, 1 on failure and 2 on a usage error, and errors as one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from dispatcher import DISTRIBUTION, version
from dispatcher.cli import control, dead_letters, enqueue, failures, info, jobs, local, status, tick, tuning
from dispatcher.cli.args import Handler, Needs, Parser, Prepare
from dispatcher.cli.config import (
    RESOURCE_FIELDS,
    Aws,
    Resources,
    endpoint_problem,
    region_problem,
    resources_from_environment,
    resources_from_stack,
)
from dispatcher.cli.errors import INTERRUPTED, PROG, CliError, InterruptedRunError, UsageError, aws_failure
from dispatcher.core.errors import DispatcherError
from dispatcher.settings import STACK_OUTPUTS, variable

COMMAND_GROUPS = (status, info, control, tuning, enqueue, jobs, tick, failures, dead_letters, local)
MAX_PROBLEMS_SHOWN = 20
"""Usage problems shown, one line each; the rest are counted."""
READ_VARIABLES = [variable(name) for name in (*RESOURCE_FIELDS[:4], "max_concurrency", *RESOURCE_FIELDS[4:])]

EPILOG = f"""\
configuration:
  --stack NAME reads the stack's outputs ({", ".join(list(STACK_OUTPUTS.values())[:3])}, ...).
  Without it, the function's own variables are read: {", ".join(READ_VARIABLES)}.
  Credentials and region come from the usual AWS places; AWS_ENDPOINT_URL or
  --endpoint-url points every call at an emulator (`dispatcher local`).

examples:
  dispatcher --stack jobs info
  dispatcher --stack jobs status
  dispatcher --stack jobs status --watch
  dispatcher --stack jobs pause
  dispatcher --stack jobs set-max 20
  dispatcher --stack jobs resume
  dispatcher --stack jobs enqueue '{{"order": 42}}' --group customer-7 --name order-42
  dispatcher --stack jobs enqueue --file jobs.jsonl
  dispatcher --stack jobs tick --invoke
  dispatcher --stack jobs failed --since 3h
  dispatcher --stack jobs rerun --redrive --error 'Downstream*' --dry-run
  dispatcher --stack jobs rerun --restart --rate 5
  dispatcher --stack jobs dead-letters
  dispatcher --stack jobs redrive-dead-letters
  dispatcher local

exit status: 0 success, 1 failure, 2 usage error.
"""


def parser() -> argparse.ArgumentParser:
    """The command line, with every command's help and examples."""
    common = Parser(add_help=False)
    common.add_argument(
        "--stack", default=argparse.SUPPRESS, help="read the resources from this stack's outputs"
    )
    common.add_argument(
        "--region", default=argparse.SUPPRESS, help="AWS region (else the usual AWS configuration)"
    )
    common.add_argument(
        "--endpoint-url",
        default=argparse.SUPPRESS,
        help="send every AWS call here (an emulator); else AWS_ENDPOINT_URL",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )

    root = Parser(
        prog=PROG,
        description="Operate a dispatcher: a hard concurrency cap in front of AWS Step Functions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    root.add_argument(
        "--version",
        action="version",
        version=f"{PROG} {version()} ({DISTRIBUTION})",
        help="print the version",
    )
    commands = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True

    def command(  # noqa: PLR0913 — one keyword per part of a command
        name: str,
        handler: Handler,
        summary: str,
        examples: str,
        *,
        needs: Needs | None = None,
        prepare: Prepare | None = None,
        common_options: bool = True,
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog="examples:\n" + examples,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[common] if common_options else [],
        )
        sub.set_defaults(handler=handler, needs=needs or _nothing, prepare=prepare or _no_input)
        return sub

    for group in COMMAND_GROUPS:
        group.register(command)
    return root


def _nothing(_args: argparse.Namespace, _resources: Resources) -> Iterable[str]:
    return ()


def _no_input(_args: argparse.Namespace) -> list[str]:
    return []


VALUE_OPTIONS = ("--start-by",)
"""Options whose value may begin with ``-`` (``--start-by -5m``): argparse would take it for an option."""


def _joined(argv: list[str]) -> list[str]:
    """``--start-by -5m`` as ``--start-by=-5m``, so its value is read (and refused as a time that passed)."""
    joined: list[str] = []
    words = iter(argv)
    for word in words:
        if word in VALUE_OPTIONS:
            value = next(words, None)
            if value is not None and value.startswith("-") and value != "--":
                joined.append(f"{word}={value}")
                continue
            joined.append(word)
            if value is not None:
                joined.append(value)
            continue
        joined.append(word)
    return joined


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one command; its exit status."""
    out = out or sys.stdout
    args = _with_defaults(parser().parse_args(_joined(sys.argv[1:] if argv is None else list(argv))))
    try:
        aws = Aws(args.region, args.endpoint_url)  # an unknown AWS_PROFILE fails here
        resources = _configure(args, aws)
        return int(args.handler(args, aws, resources, out))
    except UsageError as error:
        return _fail(error.problems, 2)
    except InterruptedRunError as error:
        return _fail([f"interrupted: {error}"], INTERRUPTED, kind="")
    except CliError as error:
        return _fail([str(error)], 1)
    except (DispatcherError, ClientError, BotoCoreError, ResponseParserError) as error:
        return _fail([aws_failure(error, args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL"))], 1)
    except KeyboardInterrupt:
        return _fail(["interrupted"], INTERRUPTED, kind="")


def _with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """The global options a command without them reads as not given (``--stack``, ``--json``, ...)."""
    for name, default in (("stack", None), ("region", None), ("endpoint_url", None), ("json", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    return args


def _configure(args: argparse.Namespace, aws: Aws) -> Resources:
    """The resources to work on, once the command's input and settings are all found good.

    Everything wrong with the command line, its files and the settings of the
    environment is found before any AWS call and reported together (a usage error).
    """
    problems = _connection_problems(args, aws) + list(args.prepare(args))
    unread: dict[str, str] = {}
    if args.command == "local":
        resources = Resources()
    elif args.stack:
        if problems:
            raise UsageError(*problems)
        resources = resources_from_stack(aws.client("cloudformation"), args.stack)
    else:
        resources, unread = resources_from_environment(dict(os.environ))
    # A variable set to a bad value is reported as such, not as unset too.
    unset = resources.unset(name for name in args.needs(args, resources) if name not in unread)
    if args.stack and unset:
        raise CliError(unset)  # the stack said so: an AWS answer, not a usage error
    problems += list(unread.values()) + ([unset] if unset else [])
    if problems:
        raise UsageError(*problems)
    return resources


def _connection_problems(args: argparse.Namespace, aws: Aws) -> list[str]:
    """What is wrong with where the AWS calls would go: the endpoint URL and the region."""
    if args.command == "local":
        return []
    problems = []
    if args.endpoint_url is not None:
        problems.append(endpoint_problem(args.endpoint_url, "--endpoint-url"))
    elif os.environ.get("AWS_ENDPOINT_URL"):
        problems.append(endpoint_problem(os.environ["AWS_ENDPOINT_URL"], "AWS_ENDPOINT_URL"))
    if aws.region is not None:
        where = "--region" if args.region else "the configured region (AWS_DEFAULT_REGION or profile)"
        problems.append(region_problem(aws.region, where))
    return [problem for problem in problems if problem is not None]


def _fail(problems: Sequence[str], status: int, kind: str = "error: ") -> int:
    shown = [" ".join(problem.split()) for problem in problems[:MAX_PROBLEMS_SHOWN]]
    if len(problems) > MAX_PROBLEMS_SHOWN:
        shown.append(f"... and {len(problems) - MAX_PROBLEMS_SHOWN} more")
    sys.stderr.write("".join(f"{PROG}: {kind}{problem}\n" for problem in shown))
    return status
