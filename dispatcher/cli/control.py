"""`dispatcher pause`, `resume`, `set-max`, `reset-limit` and `forget`: live control, each its own key."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TextIO

from dispatcher.adapters.lease import TickLease
from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.cli.args import AddCommand, non_negative
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.errors import CliError, UsageError
from dispatcher.cli.members import add_member_options, chosen_member, names_of
from dispatcher.cli.parameter import (
    Document,
    change_control,
    control_needs,
    entry_of,
    steered_topology,
    target_of,
)
from dispatcher.cli.pool_limits import LimitChange, change_limit, ledger_of, live_topology
from dispatcher.core.adaptive import LimitState, initial_limit, reset
from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS, Control
from dispatcher.core.overrides import Override
from dispatcher.core.topology import DEFAULT, Topology


def _changed(
    args: argparse.Namespace, resources: Resources, **keys: object
) -> Callable[[Document], Document]:
    """The change to the parameter: ``keys`` at the top level (pool default), or in the named entry."""
    target = target_of(args, resources)

    def change(current: Document) -> Document:
        entry_of(current, target).update(keys)
        return current

    return change


def _report(args: argparse.Namespace, name: str, control: Control, out: TextIO) -> int:
    entry: Override = control
    label = ""
    chosen = chosen_member(args)
    if chosen is not None and chosen != ("pool", DEFAULT):
        kind, chosen_name = chosen
        entry = getattr(control, f"{kind}s").get(chosen_name, Override())
        label = f"{kind} {chosen_name}: "
    # MAX 0 starts nothing, as a pause does: it reads as paused everywhere (as in `status`).
    paused = bool(entry.paused) or entry.max_concurrency == 0
    if args.json:
        document = {"parameter": name, **control.document(), "paused": paused}
        out.write(json.dumps(document) + "\n")
        return 0
    state = "paused" if paused else "running"
    fallback = "MAX from the environment" if not label else "MAX from LANES"
    limit = fallback if entry.max_concurrency is None else f"MAX {entry.max_concurrency}"
    out.write(
        f"{label}{state}, {limit} (parameter {name}; ticks see it within {CONTROL_MAX_AGE_SECONDS} s)\n"
    )
    return 0


def command_pause(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Pause: nothing starts, nothing is lost (``--wait``: return once no tick can start anything).

    A tick reads the parameter through a cache of `CONTROL_MAX_AGE_SECONDS`, and a tick in
    flight finishes the rounds it began: so the pause holds for every tick once that long
    has passed and the tick in flight then has ended (`TickLease.await_tick_in_flight`).
    """
    name, control = change_control(
        aws, resources, _changed(args, resources, paused=True), topology=steered_topology(args, resources)
    )
    if args.wait:
        written = time.monotonic()
        sys.stderr.write(
            f"waiting for every tick to see the pause ({CONTROL_MAX_AGE_SECONDS} s)"
            " and for the tick in flight to end\n"
        )
        sys.stderr.flush()
        time.sleep(max(0.0, written + CONTROL_MAX_AGE_SECONDS - time.monotonic()))
        lease = TickLease(
            aws.client("dynamodb"), resources.need("state_table"), resources.need("state_machine_arn")
        )
        lease.await_tick_in_flight("pause")
    code = _report(args, name, control, out)
    if not args.json:
        out.write(
            "  no tick starts anything more\n"
            if args.wait
            else "  a tick in flight may still start what it received: pause --wait returns once none can\n"
        )
    return code


def command_resume(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Resume after a pause."""
    name, control = change_control(
        aws, resources, _changed(args, resources, paused=False), topology=steered_topology(args, resources)
    )
    return _report(args, name, control, out)


def command_set_max(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Change MAX without a deploy (a paused dispatcher stays paused); an adaptive pool's L is clamped."""
    name, control = change_control(
        aws,
        resources,
        _changed(args, resources, max_concurrency=args.max),
        topology=steered_topology(args, resources),
    )
    clamped = _clamped(args, aws, resources)
    code = _report(args, name, control, out)
    if clamped is not None and not args.json:
        out.write(f"pool {clamped.pool}: limit {clamped.after} (was {clamped.before}; adaptive)\n")
    return code


def _clamped(args: argparse.Namespace, aws: Aws, resources: Resources) -> LimitChange | None:
    """Clamp the chosen pool's kept limit into [.., MAX] at once (None: not a pool, or it doesn't adapt).

    MAX 0 is a pause (nothing starts, whatever L is): the learned limit is kept for when MAX
    comes back, as `pause` keeps it.
    """
    chosen = chosen_member(args) or ("pool", DEFAULT)
    if chosen[0] != "pool" or args.max == 0:
        return None
    topology = live_topology(aws, resources)
    pool = topology.pool(chosen[1])
    ledger = ledger_of(aws, resources, topology)
    if pool.adaptive is None or ledger is None:
        return None
    ceiling = pool.max_concurrency

    def clamp(kept: LimitState | None, now: float) -> LimitState | None:
        if kept is None or kept.limit <= ceiling:
            return None
        return replace(kept, limit=ceiling, version=kept.version + 1, clean=0, changed_at=now)

    return change_limit(ledger, pool, clamp, time.time)


def command_reset_limit(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Set an adaptive pool's limit back to its start (``initial``, else MAX): it learns again from there."""
    name = args.pool or DEFAULT
    if name not in names_of(resources.topology(), "pool"):
        raise UsageError(
            f"--pool {name}: no such pool (pools: {', '.join(names_of(resources.topology(), 'pool'))})"
        )
    topology = live_topology(aws, resources)
    pool = topology.pool(name)
    if pool.adaptive is None:
        raise UsageError(
            f"pool {name} is not adaptive: its limit is its MAX ({pool.max_concurrency});"
            " give it adaptive settings in LANES or the control parameter"
        )
    ledger = ledger_of(aws, resources, topology)
    if ledger is None:
        raise CliError(str(resources.unset(["state_table"])))
    start = initial_limit(pool.adaptive, pool.max_concurrency)
    change = change_limit(ledger, pool, lambda kept, now: reset(kept, start, now), time.time)
    if args.json:
        out.write(
            json.dumps(
                {
                    "pool": name,
                    "limit": change.after,
                    "was": change.before,
                    "max_concurrency": change.max_concurrency,
                }
            )
            + "\n"
        )
        return 0
    out.write(
        f"pool {name}: limit {change.after} (was {change.before}; MAX {change.max_concurrency});"
        " it learns again from there\n"
    )
    return 0


def command_forget(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Remove a stale key: one naming a pool, lane or gate that is no longer configured."""
    kind, name = chosen_member(args) or ("", "")
    key = f"{kind}s.{name}"
    topology = resources.topology()
    if name in names_of(topology, kind):
        raise UsageError(
            f"--{kind} {name}: {kind} {name} is configured, so {key} is not stale:"
            f" change it with {_changers(kind)} --{kind} {name}"
        )
    forgotten: Document = {}

    def change(current: Document) -> Document:
        entries = current.get(f"{kind}s")
        if isinstance(entries, dict) and name in entries:
            forgotten[key] = entries.pop(name)
        return current

    parameter, control = change_control(aws, resources, change, write=lambda: bool(forgotten))
    queues = _forget_queues(aws, resources, topology, key) if kind != "pool" else None
    if args.json:
        document = {"parameter": parameter, "forgotten": forgotten, "forgotten_queues": queues}
        out.write(json.dumps({**document, **control.document()}) + "\n")
        return 0
    if forgotten:
        held = json.dumps(forgotten[key], sort_keys=True)
        out.write(
            f"forgot {key} (it held {held}; parameter {parameter};"
            f" ticks see it within {CONTROL_MAX_AGE_SECONDS} s)\n"
        )
    if queues is not None:
        out.write(f"forgot {key}'s queues (status no longer counts them): {queues['queue_url']}\n")
    if not forgotten and queues is None:
        out.write(f"nothing to forget: parameter {parameter} has no key {key}, and no tick kept its queues\n")
    return 0


def _forget_queues(aws: Aws, resources: Resources, topology: Topology, key: str) -> dict[str, str] | None:
    """Drop a removed member's queues from what the ticks keep (`status` counts them); what they were."""
    if not resources.state_table:
        return None
    ledger = StartLedgerTable(
        aws.client("dynamodb"), resources.state_table, topology.default_lane.state_machine_arn
    )
    kept = ledger.members()
    if key not in kept:
        return None
    queues = kept.pop(key)
    ledger.record_members(kept)
    return queues


def _changers(kind: str) -> str:
    """The commands that change a configured member's keys."""
    return "pause, resume or set-max" if kind == "pool" else "pause, resume, set-max, set or unset"


def register(command: AddCommand) -> None:
    """Add `pause`, `resume`, `set-max`, `reset-limit` and `forget`."""
    pause = command(
        "pause",
        command_pause,
        "Pause: ticks start nothing and every job stays queued (the control parameter's paused key)."
        " Ticks see it within 5 s; --wait returns once none can start anything more.",
        "  dispatcher --stack jobs pause\n"
        "  dispatcher --stack jobs pause --wait   # returns once no tick starts anything more\n"
        "  dispatcher --stack jobs pause --lane backfill\n"
        "  dispatcher --stack jobs pause --gate crawl   # its executions wait at the gate\n",
        needs=lambda args, resources: [
            *control_needs(args, resources),
            *(["state_table", "state_machine_arn"] if args.wait else []),
        ],
    )
    resume = command(
        "resume",
        command_resume,
        "Resume after a pause (MAX is unchanged).",
        "  dispatcher --stack jobs resume\n"
        "  dispatcher --stack jobs resume --lane backfill\n"
        "  dispatcher --stack jobs resume --gate crawl\n",
        needs=control_needs,
    )
    set_max = command(
        "set-max",
        command_set_max,
        "Change MAX without a deploy (the control parameter's max_concurrency key; a pause stays).",
        "  dispatcher --stack jobs set-max 20\n"
        "  dispatcher set-max 0   # same as a pause\n"
        "  dispatcher --stack jobs set-max 3 --lane backfill\n"
        "  dispatcher --stack jobs set-max 10 --pool glue\n"
        "  dispatcher --stack jobs set-max 2 --gate crawl\n",
        needs=control_needs,
    )
    for each in (pause, resume, set_max):
        add_member_options(each, "change the key of", pool=True, default="pool")
    pause.add_argument(
        "--wait",
        action="store_true",
        help="return once no tick can start anything more (every tick saw the pause:"
        f" {CONTROL_MAX_AGE_SECONDS} s, and the tick in flight ended)",
    )
    set_max.add_argument(
        "max", type=non_negative, metavar="N", help="RUNNING executions allowed (integer >= 0)"
    )
    reset_limit = command(
        "reset-limit",
        command_reset_limit,
        "Set an adaptive pool's limit L back to its start (its initial setting, else MAX): it cuts and"
        " grows again from there"
        " (after the downstream's capacity came back, say).",
        "  dispatcher --stack jobs reset-limit              # pool default\n"
        "  dispatcher --stack jobs reset-limit --pool glue --json\n",
        needs=lambda args, _resources: [
            "state_table",
            "queue_url",
            "dead_letter_queue_url",
            "state_machine_arn",
        ],
    )
    reset_limit.add_argument("--pool", metavar="NAME", help="the pool (default: pool default)")
    forget = command(
        "forget",
        command_forget,
        "Remove a stale key from the control parameter: one that steers a pool, lane or gate"
        " no longer configured (ticks ignore it; status lists it).",
        "  dispatcher --stack jobs forget --lane retired   # after removing lane retired from LANES\n"
        "  dispatcher --stack jobs forget --pool archive --json\n",
        needs=control_needs,
    )
    add_member_options(forget, "remove the key of", pool=True, required=True)
