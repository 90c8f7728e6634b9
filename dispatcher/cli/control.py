"""`dispatcher pause`, `resume` and `set-max`: live control, each changing only its own key."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TextIO

from dispatcher.cli.args import AddCommand, non_negative
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.errors import CliError
from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS, Control


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


def _report(args: argparse.Namespace, name: str, control: Control, out: TextIO) -> int:
    # MAX 0 starts nothing, as a pause does: it reads as paused everywhere (as in `status`).
    paused = bool(control.paused) or control.max_concurrency == 0
    if args.json:
        document = {"parameter": name, **control.document(), "paused": paused}
        out.write(json.dumps(document) + "\n")
        return 0
    state = "paused" if paused else "running"
    limit = (
        "MAX from the environment" if control.max_concurrency is None else f"MAX {control.max_concurrency}"
    )
    out.write(f"{state}, {limit} (parameter {name}; ticks see it within {CONTROL_MAX_AGE_SECONDS} s)\n")
    return 0


def command_pause(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Pause: nothing starts, nothing is lost."""
    name, control = change_control(
        aws, resources, lambda current: current.model_copy(update={"paused": True})
    )
    return _report(args, name, control, out)


def command_resume(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Resume after a pause."""
    name, control = change_control(
        aws, resources, lambda current: current.model_copy(update={"paused": False})
    )
    return _report(args, name, control, out)


def command_set_max(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Change MAX without a deploy (a paused dispatcher stays paused)."""
    name, control = change_control(
        aws, resources, lambda current: current.model_copy(update={"max_concurrency": args.max})
    )
    return _report(args, name, control, out)


def control_needs(_args: argparse.Namespace, _resources: Resources) -> list[str]:
    """Live control needs the control parameter."""
    return ["control_parameter"]


def register(command: AddCommand) -> None:
    """Add `pause`, `resume` and `set-max`."""
    command(
        "pause",
        command_pause,
        "Pause: ticks start nothing and every job stays queued (the control parameter's paused key).",
        "  dispatcher --stack jobs pause\n",
        needs=control_needs,
    )
    command(
        "resume",
        command_resume,
        "Resume after a pause (MAX is unchanged).",
        "  dispatcher --stack jobs resume\n",
        needs=control_needs,
    )
    set_max = command(
        "set-max",
        command_set_max,
        "Change MAX without a deploy (the control parameter's max_concurrency key; a pause stays).",
        "  dispatcher --stack jobs set-max 20\n  dispatcher set-max 0   # same as a pause\n",
        needs=control_needs,
    )
    set_max.add_argument(
        "max", type=non_negative, metavar="N", help="RUNNING executions allowed (integer >= 0)"
    )
