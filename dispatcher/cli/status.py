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
from dataclasses import asdict
from typing import Any, TextIO

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.adapters.sqs import queue_depth
from dispatcher.cli.args import AddCommand, seconds
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.errors import UsageError
from dispatcher.cli.groups import print_groups, top
from dispatcher.cli.kind_status import StatusRead
from dispatcher.cli.lane_status import LaneStatus
from dispatcher.cli.members import add_member_options, chosen_member
from dispatcher.cli.members import member as find_member
from dispatcher.cli.parameter import described
from dispatcher.cli.pool_limits import environment_max, ledger_of, with_limits
from dispatcher.cli.status_kinds import CLI_KINDS
from dispatcher.cli.status_view import (
    PoolStatus,
    RemovedStatus,
    Status,
    member_status,
    problem_text,
    status_document,
    status_table,
)
from dispatcher.core.adaptive import initial_limit
from dispatcher.core.control import Control, ControlError, max_source, stale_keys, steer
from dispatcher.core.counting import pool_count, pool_running
from dispatcher.core.effective import settings
from dispatcher.core.errors import ConfigurationError, DispatcherError
from dispatcher.core.member_queues import members_of, removed
from dispatcher.core.sizes import Reservation
from dispatcher.core.topology import DEFAULT, Pool, Topology


def read_status(aws: Aws, resources: Resources, now: float) -> Status:
    """MAX and pause, RUNNING, the queues' depths and the oldest RUNNING execution, per pool and member."""
    read, problem, configured, steered = _steered(aws, resources)
    ledger = ledger_of(aws, resources, configured)
    topology = with_limits(steered, ledger)
    shown = {(each.kind, each.member, each.key): each.as_json() for each in settings(configured, read)}
    sizes, reservations = ({}, {}) if ledger is None else ledger.slot_items()
    kinds = tuple(kind.status(StatusRead(aws, resources, topology, shown, now, sizes)) for kind in CLI_KINDS)
    running = {key: count for kind in kinds for key, count in kind.counts.items()}
    executions = {**running, **{key: count for kind in kinds for key, count in kind.executions.items()}}
    pools = [
        _pool(
            pool,
            (pool_running(topology, pool.name, running), pool_running(topology, pool.name, executions)),
            reservations.get(pool.name),
        )
        for pool in topology.pools
    ]
    default_lane = topology.default_lane
    lanes = next(kind for kind in kinds if kind.kind.primary)
    listing = lanes.listings[default_lane.state_machine_arn]
    lane = next(each for each in lanes.members if isinstance(each, LaneStatus) and each.name == DEFAULT)
    default_pool = next(pool for pool in pools if pool.name == DEFAULT)
    oldest = listing.oldest_started_at
    return Status(
        max_concurrency=topology.default_pool.max_concurrency,
        paused=topology.default_pool.halted,
        limit=default_pool.limit,
        adaptive=default_pool.adaptive,
        running=default_pool.running,
        free=default_pool.free,
        executions=default_pool.executions,
        queued=lane.queued,
        in_flight=lane.in_flight,
        dead_letters=lane.dead_letters,
        oldest_running_seconds=None if oldest is None else round(max(0.0, now - oldest), 1),
        max_from=max_source(read, resources.control_parameter),
        pools=tuple(pools),
        kinds=kinds,
        stale_keys=stale_keys(configured, read),
        control_problem=problem,
        removed=_removed(aws, resources, configured),
    )


def _steered(aws: Aws, resources: Resources) -> tuple[Control | None, str | None, Topology, Topology]:
    """The control parameter as read, what is wrong with it, the configured members and the steered ones.

    A parameter that can't be used is shown with why, and the configured values in its place.
    """
    control = control_parameter(aws, resources)
    problem = None
    try:
        read = None if control is None else control.read()
    except ConfigurationError as error:
        # Every tick stops on it; the operator sees why and what is configured, and mends it.
        read, problem = None, described(error, resources.control_parameter or "")
    configured = resources.topology(environment_max(resources, read))
    try:
        steered = steer(configured, read, resources.control_parameter)
    except ControlError as error:  # sound on its own, but not with these members (a shared lane's MAX)
        read, problem = None, str(error)
        configured = resources.topology(environment_max(resources, read))
        steered = configured
    return read, problem, configured, steered


def _removed(aws: Aws, resources: Resources, configured: Topology) -> tuple[RemovedStatus, ...]:
    """The members the ticks recorded that ``LANES`` no longer has, with their queues' depths."""
    if not resources.state_table:
        return ()
    ledger = StartLedgerTable(
        aws.client("dynamodb"), resources.state_table, configured.default_lane.state_machine_arn
    )
    found = []
    for member, queues in removed(ledger.members(), members_of(configured)).items():
        found.append(
            RemovedStatus(
                member,
                queues["queue_url"],
                queues["dead_letter_queue_url"],
                _depth(aws, queues["queue_url"]),
                _depth(aws, queues["dead_letter_queue_url"]),
            )
        )
    return tuple(found)


def _depth(aws: Aws, url: str) -> int | None:
    """Every message on a queue (visible and in flight); None when it can't be read."""
    try:
        depth = queue_depth(aws.client("sqs"), url)
    except DispatcherError:
        return None
    return depth.visible + depth.in_flight


def _pool(pool: Pool, running: tuple[int, int], reservation: Reservation | None) -> PoolStatus:
    """A pool's row: ``running`` in slots and in executions; the large job its freed slots are kept for."""
    count = pool_count(pool, running[0])
    return PoolStatus(
        pool.name,
        pool.max_concurrency,
        count.running,
        count.free,
        pool.halted,
        None if pool.adaptive is None else pool.ceiling,
        None
        if pool.adaptive is None
        else {**pool.adaptive.as_json(), "initial": initial_limit(pool.adaptive, pool.max_concurrency)},
        running[1],
        None if reservation is None else asdict(reservation),
    )


def status_needs(_args: argparse.Namespace, resources: Resources) -> list[str]:
    """The queues and the state machine; MAX from the environment unless a control parameter may give it."""
    return [
        "queue_url",
        "dead_letter_queue_url",
        "state_machine_arn",
        *([] if resources.control_parameter else ["max_concurrency"]),
    ]


def _show_status(
    args: argparse.Namespace, status: Status, member: tuple[str, str] | None, out: TextIO
) -> None:
    """One status: JSON, or the table (under the time and a cleared screen when watching)."""
    document: dict[str, Any] = status_document(status)
    text = status_table(status)
    if member is not None:
        document, text = member_status(status, *member)
        if status.control_problem is not None:
            document["control_problem"] = status.control_problem
            text = f"{problem_text(status.control_problem)}\n\n{text}"
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
