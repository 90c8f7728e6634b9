"""`dispatcher status`: MAX, paused, RUNNING, free, queued, in flight, dead letters, the oldest RUNNING.

With lanes, one row more per pool (MAX, RUNNING, free), per lane (its MAX, queue and dead
letters) and per gate (its MAX, who is inside, who waits, its dead letters); the control
parameter's stale keys below them. ``--pool``, ``--lane`` or ``--gate`` shows one member.
A pool's RUNNING and free are counted by the tick's own function (`pool_count`).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from dispatcher.adapters.roster import RosterTable
from dispatcher.adapters.sqs import queue_depth
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.cli.args import AddCommand, seconds
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.errors import UsageError
from dispatcher.cli.groups import print_groups, top
from dispatcher.cli.members import add_member_options, chosen_member
from dispatcher.cli.members import member as find_member
from dispatcher.cli.output import age, table
from dispatcher.core.control import Control, max_source, stale_keys, steer
from dispatcher.core.counting import pool_count
from dispatcher.core.topology import DEFAULT, Gate, Lane, PoolLimit, Topology


@dataclass(frozen=True)
class PoolStatus:
    """One pool: its MAX, RUNNING across its lanes' state machines and inside its gates, and free slots."""

    name: str
    max_concurrency: int
    running: int
    free: int
    paused: bool


@dataclass(frozen=True)
class LaneStatus:
    """One lane: its queue and dead letters (and its own MAX, None: its pool's alone)."""

    name: str
    pool: str
    priority: int
    queued: int
    in_flight: int
    dead_letters: int
    paused: bool
    max_concurrency: int | None


@dataclass(frozen=True)
class GateStatus:
    """One gate: who is inside (as the dispatcher counts them), who waits (its requests), its dead letters."""

    name: str
    pool: str
    inside: int
    waiting: int
    paused: bool
    max_concurrency: int | None
    """The gate's own MAX (None: its pool's alone)."""
    dead_letters: int


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
    stale_keys: tuple[str, ...] = ()
    """Control parameter keys naming a pool, lane or gate that isn't configured: ignored by the ticks."""


def _halted(max_concurrency: int | None, paused: bool) -> bool:
    """MAX 0 starts and admits nothing, as a pause does: it reads as paused everywhere."""
    return paused or max_concurrency == 0


def _environment_max(resources: Resources, read: Control | None) -> int:
    """The environment's MAX for pool default: its own, unless the parameter overrides it."""
    if read is None or read.max_concurrency is None:
        return resources.environment_max()
    return resources.max_concurrency or 0  # overridden by the parameter


def read_status(aws: Aws, resources: Resources, now: float) -> Status:
    """Read MAX and pause, RUNNING, the queues' depths and the oldest RUNNING execution, per pool and lane."""
    control = control_parameter(aws, resources)
    read = None if control is None else control.read()
    configured = resources.topology(_environment_max(resources, read))
    topology = steer(configured, read, resources.control_parameter)
    listings = {
        arn: StateMachine(aws.client("stepfunctions"), arn).list_running(None, {}, listed_at=now)
        for arn in topology.state_machines
    }
    gates = _gates(aws, resources, topology)
    running = {arn: len(listing.executions) for arn, listing in listings.items()}
    inside = {gate.name: gate.inside for gate in gates}
    pools = [_pool(topology, pool, running, inside) for pool in topology.pools]
    lanes = [_lane(aws, lane, topology) for lane in topology.lanes]
    oldest = listings[topology.default_lane.state_machine_arn].oldest_started_at
    default_pool = next(pool for pool in pools if pool.name == DEFAULT)
    default_lane = next(lane for lane in lanes if lane.name == DEFAULT)
    return Status(
        max_concurrency=topology.default_pool.max_concurrency,
        paused=topology.default_pool.halted,
        running=default_pool.running,
        free=default_pool.free,
        queued=default_lane.queued,
        in_flight=default_lane.in_flight,
        dead_letters=default_lane.dead_letters,
        oldest_running_seconds=None if oldest is None else round(max(0.0, now - oldest), 1),
        max_from=max_source(read, resources.control_parameter),
        pools=tuple(pools),
        lanes=tuple(lanes),
        gates=tuple(gates),
        stale_keys=stale_keys(configured, read),
    )


def _pool(topology: Topology, pool: PoolLimit, running: dict[str, int], inside: dict[str, int]) -> PoolStatus:
    count = pool_count(topology, pool, running, inside)
    return PoolStatus(pool.name, pool.max_concurrency, count.running, count.free, pool.halted)


def _lane(aws: Aws, lane: Lane, topology: Topology) -> LaneStatus:
    queue = queue_depth(aws.client("sqs"), lane.queue_url)
    dead_letters = queue_depth(aws.client("sqs"), lane.dead_letter_queue_url)
    return LaneStatus(
        lane.name,
        lane.pool,
        lane.priority,
        queue.visible,
        queue.in_flight,
        dead_letters.visible + dead_letters.in_flight,
        _halted(lane.max_concurrency, lane.paused) or topology.pool(lane.pool).halted,
        lane.max_concurrency,
    )


def _gates(aws: Aws, resources: Resources, topology: Topology) -> list[GateStatus]:
    """Each gate: who is inside (its admissions in the state table), who waits (its queue), dead letters."""
    if not topology.gates:
        return []
    table = RosterTable(
        aws.client("dynamodb"), resources.need("state_table"), topology.default_lane.state_machine_arn
    )
    return [_gate(aws, table, gate, topology) for gate in topology.gates]


def _gate(aws: Aws, table: RosterTable, gate: Gate, topology: Topology) -> GateStatus:
    inside = len(table.read(gate).entries)
    queue = queue_depth(aws.client("sqs"), gate.queue_url)
    dead_letters = queue_depth(aws.client("sqs"), gate.dead_letter_queue_url)
    return GateStatus(
        gate.name,
        gate.pool,
        inside,
        queue.visible + queue.in_flight,
        _halted(gate.max_concurrency, gate.paused) or topology.pool(gate.pool).halted,
        gate.max_concurrency,
        dead_letters.visible + dead_letters.in_flight,
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


def _summary(status: Status) -> str:
    """The top-level row (pool and lane ``default``): a header and one row, right-aligned."""
    row = [
        str(status.max_concurrency),
        _yes(status.paused),
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


def _pools(pools: tuple[PoolStatus, ...]) -> str:
    return table(
        ["POOL", "MAX", "PAUSED", "RUNNING", "FREE"],
        [
            [pool.name, str(pool.max_concurrency), _yes(pool.paused), str(pool.running), str(pool.free)]
            for pool in pools
        ],
    )


def _lanes(lanes: tuple[LaneStatus, ...]) -> str:
    return table(
        ["LANE", "POOL", "PRIORITY", "MAX", "PAUSED", "QUEUED", "IN FLIGHT", "DEAD LETTERS"],
        [
            [
                lane.name,
                lane.pool,
                str(lane.priority),
                _max(lane.max_concurrency),
                _yes(lane.paused),
                str(lane.queued),
                str(lane.in_flight),
                str(lane.dead_letters),
            ]
            for lane in lanes
        ],
    )


def _gates_table(gates: tuple[GateStatus, ...]) -> str:
    return table(
        ["GATE", "POOL", "MAX", "PAUSED", "INSIDE", "WAITING", "DEAD LETTERS"],
        [
            [
                gate.name,
                gate.pool,
                _max(gate.max_concurrency),
                _yes(gate.paused),
                str(gate.inside),
                str(gate.waiting),
                str(gate.dead_letters),
            ]
            for gate in gates
        ],
    )


def _stale(keys: tuple[str, ...]) -> str:
    """One line per stale key, with the command that removes it."""
    lines = ["STALE CONTROL KEYS (ignored: no such member is configured)"]
    for key in keys:
        kind, _, name = key.partition(".")
        lines.append(f"{key}  remove it: dispatcher forget --{kind.removesuffix('s')} {name}")
    return "\n".join(lines)


def status_table(status: Status) -> str:
    """The status as aligned tables: the top-level row, then pools, lanes, gates and stale keys if any."""
    text = _summary(status)
    if len(status.lanes) <= 1 and len(status.pools) <= 1 and not status.gates and not status.stale_keys:
        return text
    parts = [text, _pools(status.pools), _lanes(status.lanes)]
    if status.gates:
        parts.append(_gates_table(status.gates))
    if status.stale_keys:
        parts.append(_stale(status.stale_keys))
    return "\n\n".join(parts)


def member_status(status: Status, kind: str, name: str) -> tuple[dict[str, Any], str]:
    """One configured pool's, lane's or gate's entry (for ``--json``) and its rows as text.

    A pool's text shows its row, then the rows of its lanes and gates.
    """
    entries: dict[str, tuple[Any, ...]] = {"pool": status.pools, "lane": status.lanes, "gate": status.gates}
    found = next(entry for entry in entries[kind] if entry.name == name)
    if isinstance(found, LaneStatus):
        return asdict(found), _lanes((found,))
    if isinstance(found, GateStatus):
        return asdict(found), _gates_table((found,))
    lanes = tuple(lane for lane in status.lanes if lane.pool == name)
    gates = tuple(gate for gate in status.gates if gate.pool == name)
    text = "\n\n".join([_pools((found,)), _lanes(lanes), *([_gates_table(gates)] if gates else [])])
    return asdict(found), text


def _max(value: int | None) -> str:
    return "-" if value is None else str(value)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _show_status(
    args: argparse.Namespace, status: Status, member: tuple[str, str] | None, out: TextIO
) -> None:
    """One status: JSON, or the table (under the time and a cleared screen when watching)."""
    document: dict[str, Any] = asdict(status)
    text = status_table(status)
    if member is not None:
        document, text = member_status(status, *member)
    if args.json:
        out.write(json.dumps(document) + "\n")
        return
    if args.watch is not None and out.isatty():
        out.write("\x1b[H\x1b[2J")
    if args.watch is not None:
        out.write(time.strftime("%H:%M:%S") + f"  every {args.watch:g}s, Ctrl-C to stop\n")
    out.write(text + "\n")


def command_status(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Print the status once, or every --watch seconds until interrupted (or --count times)."""
    member = chosen_member(args)
    if member is not None:
        find_member(resources, *member)  # an unknown name is a usage error, before any count
    if args.groups:
        return print_groups(args, aws, resources, out)
    if args.top is not None:
        raise UsageError("--top goes with --groups")
    shown = 0
    while True:
        _show_status(args, read_status(aws, resources, time.time()), member, out)
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
        "MAX, paused, RUNNING, free, queued, in flight, dead letters and the oldest RUNNING execution;"
        " with lanes and gates, a row for each pool, lane and gate.",
        "  dispatcher --stack jobs status\n"
        "  dispatcher status --json\n"
        "  dispatcher --stack jobs status --watch 5\n"
        "  dispatcher --stack jobs status --pool glue      # the pool, its lanes and its gates\n"
        "  dispatcher --stack jobs status --gate crawl --json\n"
        "  dispatcher --stack jobs status --groups --top 10   # the tenants holding most\n"
        "  dispatcher status --groups --gate crawl --json\n",
        needs=status_needs,
    )
    status.add_argument(
        "--watch", nargs="?", const=2.0, type=seconds, metavar="SECONDS", help="refresh every SECONDS (2)"
    )
    status.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N refreshes")
    status.add_argument(
        "--groups",
        action="store_true",
        help="per member and message group: RUNNING as the dispatcher counts it, and held jobs",
    )
    status.add_argument("--top", type=top, metavar="N", help="with --groups: the N groups holding most")
    add_member_options(status, "show", pool=True)
