"""`dispatcher status`: MAX, paused, RUNNING, free, queued, in flight, dead letters, the oldest RUNNING.

With lanes, one row more per pool (MAX, RUNNING, free) and per lane (its queue and dead
letters); with gates, per gate (who is inside, who waits).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from typing import TextIO

from dispatcher.adapters.sqs import queue_depth
from dispatcher.adapters.state_table import StateTable
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.cli.args import AddCommand, seconds
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.output import age, table
from dispatcher.core.control import combine, steer
from dispatcher.core.counting import free_slots
from dispatcher.core.lanes import Topology


@dataclass(frozen=True)
class PoolStatus:
    """One pool: its MAX, RUNNING across its lanes' state machines, and free slots."""

    name: str
    max_concurrency: int
    running: int
    free: int
    paused: bool


@dataclass(frozen=True)
class LaneStatus:
    """One lane: its queue and dead letters."""

    name: str
    pool: str
    priority: int
    queued: int
    in_flight: int
    dead_letters: int
    paused: bool


@dataclass(frozen=True)
class GateStatus:
    """One gate: its executions inside (as the dispatcher counts them) and waiting (requests on its queue)."""

    name: str
    pool: str
    inside: int
    waiting: int
    paused: bool


@dataclass(frozen=True)
class Status:
    """How the dispatcher stands right now: top-level keys are pool and lane ``default``."""

    max_concurrency: int
    paused: bool
    running: int
    free: int
    queued: int
    in_flight: int
    dead_letters: int
    oldest_running_seconds: float | None
    max_from: str
    pools: tuple[PoolStatus, ...] = ()
    lanes: tuple[LaneStatus, ...] = ()
    gates: tuple[GateStatus, ...] = ()


def read_status(aws: Aws, resources: Resources, now: float) -> Status:
    """Read MAX and pause, RUNNING, the queues' depths and the oldest RUNNING execution, per pool and lane."""
    control = control_parameter(aws, resources)
    read = None if control is None else control.read()
    if read is None or read.max_concurrency is None:
        environment_max = resources.environment_max()
    else:
        environment_max = resources.max_concurrency or 0  # overridden by the parameter
    limits = combine(environment_max, read, resources.control_parameter)
    topology = steer(resources.topology(environment_max), read, resources.control_parameter)
    listings = {
        arn: StateMachine(aws.client("stepfunctions"), arn).list_running(None, {}, listed_at=now)
        for arn in topology.state_machines
    }
    gates = _gates(aws, resources, topology)
    pools = []
    for pool in topology.pools:
        running = sum(len(listings[arn].executions) for arn in topology.state_machines_of(pool.name))
        running += sum(gate.inside for gate in gates if gate.pool == pool.name)
        free = 0 if pool.halted else free_slots(pool.max_concurrency, running)
        pools.append(PoolStatus(pool.name, pool.max_concurrency, running, free, pool.halted))
    lanes = []
    for lane in topology.lanes:
        queue = queue_depth(aws.client("sqs"), lane.queue_url)
        dead_letters = queue_depth(aws.client("sqs"), lane.dead_letter_queue_url)
        paused = lane.paused or topology.pool(lane.pool).halted
        lanes.append(
            LaneStatus(
                lane.name,
                lane.pool,
                lane.priority,
                queue.visible,
                queue.in_flight,
                dead_letters.visible + dead_letters.in_flight,
                paused,
            )
        )
    oldest = listings[topology.default_lane.state_machine_arn].oldest_started_at
    default_pool, default_lane = pools[0], lanes[0]
    return Status(
        max_concurrency=limits.max_concurrency,
        paused=limits.halted,
        running=default_pool.running,
        free=default_pool.free,
        queued=default_lane.queued,
        in_flight=default_lane.in_flight,
        dead_letters=default_lane.dead_letters,
        oldest_running_seconds=None if oldest is None else round(max(0.0, now - oldest), 1),
        max_from=limits.source,
        pools=tuple(pools),
        lanes=tuple(lanes),
        gates=tuple(gates),
    )


def _gates(aws: Aws, resources: Resources, topology: Topology) -> list[GateStatus]:
    """Each gate: who is inside (its admissions in the state table), who waits (its queue)."""
    if not topology.gates:
        return []
    table = StateTable(
        aws.client("dynamodb"), resources.need("state_table"), topology.default_lane.state_machine_arn
    )
    found = []
    for gate in topology.gates:
        inside = len(table.inside(gate.name, gate.state_machine_arn).records)
        queue = queue_depth(aws.client("sqs"), gate.queue_url)
        paused = gate.paused or topology.pool(gate.pool).halted
        found.append(GateStatus(gate.name, gate.pool, inside, queue.visible + queue.in_flight, paused))
    return found


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
    text = "\n".join(line.rstrip() for line in lines)
    if len(status.lanes) <= 1 and len(status.pools) <= 1 and not status.gates:
        return text
    pools = table(
        ["POOL", "MAX", "PAUSED", "RUNNING", "FREE"],
        [
            [pool.name, str(pool.max_concurrency), _yes(pool.paused), str(pool.running), str(pool.free)]
            for pool in status.pools
        ],
    )
    gates = table(
        ["GATE", "POOL", "PAUSED", "INSIDE", "WAITING"],
        [
            [gate.name, gate.pool, _yes(gate.paused), str(gate.inside), str(gate.waiting)]
            for gate in status.gates
        ],
    )
    lanes = table(
        ["LANE", "POOL", "PRIORITY", "PAUSED", "QUEUED", "IN FLIGHT", "DEAD LETTERS"],
        [
            [
                lane.name,
                lane.pool,
                str(lane.priority),
                _yes(lane.paused),
                str(lane.queued),
                str(lane.in_flight),
                str(lane.dead_letters),
            ]
            for lane in status.lanes
        ],
    )
    return f"{text}\n\n{pools}\n\n{lanes}" + (f"\n\n{gates}" if status.gates else "")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


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
