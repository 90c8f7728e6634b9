"""`dispatcher status`: MAX, paused, RUNNING, free, queued, in flight, dead letters, the oldest RUNNING."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from typing import TextIO

from dispatcher.adapters.sqs import queue_depth
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.cli.args import AddCommand, seconds
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.output import age
from dispatcher.core.control import combine
from dispatcher.core.counting import free_slots


@dataclass(frozen=True)
class Status:
    """How the dispatcher stands right now."""

    max_concurrency: int
    paused: bool
    running: int
    free: int
    queued: int
    in_flight: int
    dead_letters: int
    oldest_running_seconds: float | None
    max_from: str


def read_status(aws: Aws, resources: Resources, now: float) -> Status:
    """Read MAX and pause, RUNNING, the queues' depths and the oldest RUNNING execution."""
    control = control_parameter(aws, resources)
    read = None if control is None else control.read()
    if read is None or read.max_concurrency is None:
        environment_max = resources.environment_max()
    else:
        environment_max = resources.max_concurrency or 0  # overridden by the parameter
    limits = combine(environment_max, read, resources.control_parameter)
    machine = StateMachine(aws.client("stepfunctions"), resources.need("state_machine_arn"))
    listing = machine.list_running(None, {}, listed_at=now)
    queue = queue_depth(aws.client("sqs"), resources.need("queue_url"))
    dead_letters = queue_depth(aws.client("sqs"), resources.need("dead_letter_queue_url"))
    running = len(listing.executions)
    oldest = listing.oldest_started_at
    return Status(
        max_concurrency=limits.max_concurrency,
        paused=limits.halted,
        running=running,
        free=0 if limits.halted else free_slots(limits.max_concurrency, running),
        queued=queue.visible,
        in_flight=queue.in_flight,
        dead_letters=dead_letters.visible + dead_letters.in_flight,
        oldest_running_seconds=None if oldest is None else round(max(0.0, now - oldest), 1),
        max_from=limits.source,
    )


def status_needs(_args: argparse.Namespace, resources: Resources) -> list[str]:
    """The queues and the state machine; MAX from the environment unless a control parameter may give it."""
    return [
        "queue_url",
        "dead_letter_queue_url",
        "state_machine_arn",
        *([] if resources.control_parameter else ["max_concurrency"]),
    ]


HEADERS = [
    "MAX",
    "PAUSED",
    "RUNNING",
    "FREE",
    "QUEUED",
    "IN FLIGHT",
    "DEAD LETTERS",
    "OLDEST RUNNING",
]


def status_table(status: Status) -> str:
    """The status as an aligned table: a header and one row."""
    row = [
        str(status.max_concurrency),
        "yes" if status.paused else "no",
        str(status.running),
        str(status.free),
        str(status.queued),
        str(status.in_flight),
        str(status.dead_letters),
        age(status.oldest_running_seconds),
    ]
    widths = [max(len(header), len(cell)) for header, cell in zip(HEADERS, row, strict=True)]
    lines = [
        "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))
        for cells in (HEADERS, row)
    ]
    return "\n".join(line.rstrip() for line in lines)


def command_status(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Print the status once, or every --watch seconds until interrupted (or --count times)."""
    shown = 0
    while True:
        status = read_status(aws, resources, time.time())
        if args.json:
            out.write(json.dumps(asdict(status)) + "\n")
        else:
            if args.watch is not None and out.isatty():
                out.write("\x1b[H\x1b[2J")
            if args.watch is not None:
                out.write(time.strftime("%H:%M:%S") + f"  every {args.watch:g}s, Ctrl-C to stop\n")
            out.write(status_table(status) + "\n")
        out.flush()
        shown += 1
        if args.watch is None or (args.count is not None and shown >= args.count):
            return 0
        time.sleep(args.watch)


def register(command: AddCommand) -> None:
    """Add `status`."""
    status = command(
        "status",
        command_status,
        "MAX, paused, RUNNING, free, queued, in flight, dead letters and the oldest RUNNING execution.",
        "  dispatcher --stack jobs status\n"
        "  dispatcher status --json\n"
        "  dispatcher --stack jobs status --watch 5\n",
        needs=status_needs,
    )
    status.add_argument(
        "--watch", nargs="?", const=2.0, type=seconds, metavar="SECONDS", help="refresh every SECONDS (2)"
    )
    status.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N refreshes")
