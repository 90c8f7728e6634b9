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
from collections.abc import Sequence
from typing import TextIO

from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.errors import error_code, error_message
from dispatcher.cli import control, dead_letters, enqueue, failures, local, status, tick
from dispatcher.cli.args import Handler, Parser
from dispatcher.cli.config import (
    RESOURCE_FIELDS,
    Aws,
    Resources,
    resources_from_environment,
    resources_from_stack,
)
from dispatcher.cli.errors import PROG, CliError, UsageError
from dispatcher.core.errors import DispatcherError
from dispatcher.settings import STACK_OUTPUTS, variable

COMMAND_GROUPS = (status, control, enqueue, tick, failures, dead_letters, local)
READ_VARIABLES = [variable(name) for name in (*RESOURCE_FIELDS[:4], "max_concurrency", *RESOURCE_FIELDS[4:])]

EPILOG = f"""\
configuration:
  --stack NAME reads the stack's outputs ({", ".join(list(STACK_OUTPUTS.values())[:3])}, ...).
  Without it, the function's own variables are read: {", ".join(READ_VARIABLES)}.
  Credentials and region come from the usual AWS places; AWS_ENDPOINT_URL or
  --endpoint-url points every call at an emulator (`dispatcher local`).

examples:
  dispatcher --stack jobs status
  dispatcher --stack jobs status --watch
  dispatcher --stack jobs pause
  dispatcher --stack jobs set-max 20
  dispatcher --stack jobs resume
  dispatcher --stack jobs enqueue '{{"order": 42}}' --group customer-7 --name order-42
  dispatcher --stack jobs enqueue --file jobs.jsonl
  dispatcher --stack jobs tick --invoke
  dispatcher --stack jobs failed --since 3h
  dispatcher --stack jobs rerun --redrive --error 'Api.*' --dry-run
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
    commands = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True

    def command(name: str, handler: Handler, summary: str, examples: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog="examples:\n" + examples,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[common],
        )
        sub.set_defaults(handler=handler)
        return sub

    for group in COMMAND_GROUPS:
        group.register(command)
    return root


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one command; its exit status."""
    out = out or sys.stdout
    args = parser().parse_args(argv)
    for name, default in (("stack", None), ("region", None), ("endpoint_url", None), ("json", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    try:
        aws = Aws(args.region, args.endpoint_url)
        if args.command == "local":
            resources = Resources()
        elif args.stack:
            resources = resources_from_stack(aws.client("cloudformation"), args.stack)
        else:
            resources = resources_from_environment(dict(os.environ))
        return int(args.handler(args, aws, resources, out))
    except UsageError as error:
        return _fail(str(error), 2)
    except (CliError, DispatcherError) as error:
        return _fail(str(error), 1)
    except ClientError as error:
        return _fail(f"{error.operation_name} failed: {error_code(error)}: {error_message(error)}", 1)
    except BotoCoreError as error:
        return _fail(str(error), 1)
    except KeyboardInterrupt:
        return 130


def _fail(message: str, status: int) -> int:
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    return status
