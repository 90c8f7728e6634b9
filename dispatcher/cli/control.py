"""`dispatcher pause`, `resume`, `set-max` and `forget`: live control, each changing only its own key."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TextIO

from dispatcher.cli.args import AddCommand, non_negative
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.errors import CliError, UsageError
from dispatcher.cli.members import add_member_options, chosen_member, lanes_needs, member, names_of
from dispatcher.core.control import (
    CONTROL_MAX_AGE_SECONDS,
    Control,
    GateOverride,
    LaneOverride,
    Override,
    steer,
)
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.topology import DEFAULT


def change_control(
    aws: Aws,
    resources: Resources,
    change: Callable[[Control], Control],
    write: Callable[[], bool] = lambda: True,
) -> tuple[str, Control]:
    """Read, modify, write the control parameter: only the changed key moves.

    ``write``: asked after the change, whether there is anything to write.
    """
    control = control_parameter(aws, resources)
    if control is None:
        raise CliError(
            "no control parameter: set CONTROL_PARAMETER or use --stack NAME"
            " (a stack deployed with the ControlParameter resource)"
        )
    # A parameter that doesn't exist yet is created with the changed key alone: the
    # environment's MAX keeps applying until someone sets one.
    updated = change(control.read() or Control())
    if write():
        control.write(updated)
    return control.name, updated


def _target(args: argparse.Namespace, resources: Resources) -> tuple[str, str] | None:
    """What ``--pool``, ``--lane`` or ``--gate`` names: (``pools``, ``lanes`` or ``gates``, name).

    None for pool ``default``, which the top-level keys steer.
    """
    chosen = chosen_member(args)
    if chosen is None or chosen == ("pool", DEFAULT):
        return None
    kind, name = chosen
    member(resources, kind, name)  # an unknown name is a usage error
    return f"{kind}s", name


ENTRY_KINDS: dict[str, type[Override]] = {"pools": Override, "lanes": LaneOverride, "gates": GateOverride}
"""Each kind of entry of the parameter (a lane's and a gate's also share slots among message groups)."""


def _changed(args: argparse.Namespace, resources: Resources, **keys: object) -> Callable[[Control], Control]:
    """The change to the parameter: ``keys`` at the top level (pool default), or in the named entry."""
    target = _target(args, resources)

    def change(current: Control) -> Control:
        if target is None:
            return current.model_copy(update=keys)
        kind, name = target
        entries: dict[str, Override] = dict(getattr(current, kind))
        entries[name] = entries.get(name, ENTRY_KINDS[kind]()).model_copy(update=keys)
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


def command_forget(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Remove a stale key: one naming a pool, lane or gate that is no longer configured."""
    kind, name = chosen_member(args) or ("", "")
    key = f"{kind}s.{name}"
    topology = resources.topology()
    if name in names_of(topology, kind):
        raise UsageError(
            f"--{kind} {name}: {kind} {name} is configured, so {key} is not stale:"
            f" change it with pause, resume or set-max --{kind} {name}"
        )
    forgotten: dict[str, Override] = {}

    def change(current: Control) -> Control:
        entries: dict[str, Override] = dict(getattr(current, f"{kind}s"))
        if name in entries:
            forgotten[key] = entries.pop(name)
        return current.model_copy(update={f"{kind}s": entries})

    parameter, control = change_control(aws, resources, change, write=lambda: bool(forgotten))
    if args.json:
        was = {key: value.model_dump(exclude_none=True) for key, value in forgotten.items()}
        out.write(json.dumps({"parameter": parameter, "forgotten": was, **control.document()}) + "\n")
    elif forgotten:
        held = json.dumps(forgotten[key].model_dump(exclude_none=True), sort_keys=True)
        out.write(
            f"forgot {key} (it held {held}; parameter {parameter};"
            f" ticks see it within {CONTROL_MAX_AGE_SECONDS} s)\n"
        )
    else:
        out.write(f"nothing to forget: parameter {parameter} has no key {key}\n")
    return 0


def control_needs(args: argparse.Namespace, _resources: Resources) -> list[str]:
    """Live control needs the control parameter (and, for a pool, lane or gate, what finds the lanes)."""
    return ["control_parameter", *lanes_needs(args)]


def register(command: AddCommand) -> None:
    """Add `pause`, `resume`, `set-max` and `forget`."""
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
        add_member_options(each, "change the key of", pool=True, default="pool")
    set_max.add_argument(
        "max", type=non_negative, metavar="N", help="RUNNING executions allowed (integer >= 0)"
    )
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
