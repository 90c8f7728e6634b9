"""`dispatcher pause`, `resume` and `set-max`: live control, each changing only its own key."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TextIO

from dispatcher.cli.args import AddCommand, non_negative
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.errors import CliError, UsageError
from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS, Control, Override, steer
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.lanes import DEFAULT


def change_control(
    aws: Aws, resources: Resources, change: Callable[[Control], Control]
) -> tuple[str, Control]:
    """Read, modify, write the control parameter: only the changed key moves."""
    control = control_parameter(aws, resources)
    if control is None:
        raise CliError(
            "no control parameter: set CONTROL_PARAMETER or use --stack NAME"
            " (a stack deployed with the ControlParameter resource)"
        )
    # A parameter that doesn't exist yet is created with the changed key alone: the
    # environment's MAX keeps applying until someone sets one.
    updated = change(control.read() or Control())
    control.write(updated)
    return control.name, updated


def _target(args: argparse.Namespace, resources: Resources) -> tuple[str, str] | None:
    """What ``--pool``, ``--lane`` or ``--gate`` names: (``pools``/``lanes``, name); None for pool default."""
    for kind, flag in (("pools", "pool"), ("lanes", "lane"), ("gates", "gate")):
        name = getattr(args, flag, None)
        if name is None:
            continue
        if kind == "pools" and name == DEFAULT:
            return None
        topology = resources.topology()
        known = {
            "pools": [pool.name for pool in topology.pools],
            "lanes": list(topology.names),
            "gates": list(topology.gate_names),
        }[kind]
        if name not in known:
            listed = ", ".join(known) or "none are configured"
            raise UsageError(f"--{flag} {name}: no such {flag} ({kind}: {listed})")
        return kind, name
    return None


def _changed(args: argparse.Namespace, resources: Resources, **keys: object) -> Callable[[Control], Control]:
    """The change to the parameter: ``keys`` at the top level (pool default), or in the named entry."""
    target = _target(args, resources)

    def change(current: Control) -> Control:
        if target is None:
            return current.model_copy(update=keys)
        kind, name = target
        entries: dict[str, Override] = dict(getattr(current, kind))
        entries[name] = entries.get(name, Override()).model_copy(update=keys)
        updated = current.model_copy(update={kind: entries})
        # What the next tick would refuse (a lane MAX on a shared state machine) is refused now.
        try:
            steer(resources.topology(), updated, resources.control_parameter or "")
        except ConfigurationError as error:
            raise UsageError(f"not written: {error}") from None
        return updated

    return change


def _report(args: argparse.Namespace, name: str, control: Control, out: TextIO) -> int:
    entry: Override = control
    label = ""
    for kind, flag in (("pools", "pool"), ("lanes", "lane"), ("gates", "gate")):
        chosen = getattr(args, flag, None)
        if chosen is not None and not (kind == "pools" and chosen == DEFAULT):
            entry = getattr(control, kind).get(chosen, Override())
            label = f"{flag} {chosen}: "
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
    """Pause: nothing starts, nothing is lost."""
    name, control = change_control(aws, resources, _changed(args, resources, paused=True))
    return _report(args, name, control, out)


def command_resume(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Resume after a pause."""
    name, control = change_control(aws, resources, _changed(args, resources, paused=False))
    return _report(args, name, control, out)


def command_set_max(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Change MAX without a deploy (a paused dispatcher stays paused)."""
    name, control = change_control(aws, resources, _changed(args, resources, max_concurrency=args.max))
    return _report(args, name, control, out)


def control_needs(args: argparse.Namespace, _resources: Resources) -> list[str]:
    """Live control needs the control parameter (and, for a pool, lane or gate, what finds the lanes)."""
    named = any(getattr(args, flag, None) is not None for flag in ("pool", "lane", "gate"))
    lanes = ["queue_url", "dead_letter_queue_url", "state_machine_arn"] if named else []
    return ["control_parameter", *lanes]


def _add_targets(command: argparse.ArgumentParser) -> None:
    """``--pool``, ``--lane``, ``--gate``: one of them, else pool default (the top-level keys)."""
    targets = command.add_mutually_exclusive_group()
    targets.add_argument("--pool", metavar="NAME", help="change this pool's key (default: pool default)")
    targets.add_argument("--lane", metavar="NAME", help="change this lane's key")
    targets.add_argument("--gate", metavar="NAME", help="change this gate's key")


def register(command: AddCommand) -> None:
    """Add `pause`, `resume` and `set-max`."""
    pause = command(
        "pause",
        command_pause,
        "Pause: ticks start nothing and every job stays queued (the control parameter's paused key).",
        "  dispatcher --stack jobs pause\n"
        "  dispatcher --stack jobs pause --lane backfill\n"
        "  dispatcher --stack jobs pause --gate crawl   # its executions wait at the gate\n",
        needs=control_needs,
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
        _add_targets(each)
    set_max.add_argument(
        "max", type=non_negative, metavar="N", help="RUNNING executions allowed (integer >= 0)"
    )
