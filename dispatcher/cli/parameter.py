"""The control parameter as the CLI changes it: read, modify, write, checked as a tick would read it.

Every command that writes the parameter (`pause`, `resume`, `set-max`, `forget`, `set`,
`unset`) goes through `change_control`: only its own key moves, and a malformed parameter
can be mended key by key (its error names the `unset` that mends each key).
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from typing import Any

from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.errors import CliError, UsageError
from dispatcher.cli.members import chosen_member, lanes_needs, member
from dispatcher.core.control import Control, ControlError, checked_control, steer
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.topology import DEFAULT, Topology

Document = dict[str, Any]
"""The parameter's JSON object, as it is read (its keys not yet checked)."""


def replace_advice(name: str) -> str:
    """How to replace a value that isn't a JSON object at all (no key of it can be mended)."""
    return f"replace it: aws ssm put-parameter --overwrite --type String --name {name} --value '{{}}'"


def described(error: ConfigurationError, name: str) -> str:
    """A parameter the ticks refuse, and how to mend it: the `unset` its error names, else replace it."""
    if isinstance(error, ControlError):
        return str(error)
    return f"{error}; {replace_advice(name)}"


def change_control(
    aws: Aws,
    resources: Resources,
    change: Callable[[Document], Document],
    write: Callable[[], bool] = lambda: True,
    topology: Topology | None = None,
) -> tuple[str, Control]:
    """Read, modify, write the control parameter: only the changed key moves.

    The change is made to the JSON object as it is, so a malformed parameter (which stops
    every tick) can be mended by the command that replaces or removes its bad key. What is
    written is checked first, as a tick would read it (with ``topology``, the members').
    A change that breaks a sound parameter is a usage error; one that leaves it broken
    says how to mend it. ``write``: asked after the change, whether there is anything to write.
    """
    control = control_parameter(aws, resources)
    if control is None:
        raise CliError(
            "no control parameter: set CONTROL_PARAMETER or use --stack NAME"
            " (a stack deployed with the ControlParameter resource)"
        )
    try:
        # A parameter that doesn't exist yet is created with the changed key alone: the
        # environment's MAX keeps applying until someone sets one.
        current = control.read_document() or {}
    except ConfigurationError as error:
        raise CliError(described(error, control.name)) from None
    sound = _problem(control.name, current, topology) is None
    document = change(copy.deepcopy(current))
    problem = _problem(control.name, document, topology)
    if problem is not None:
        # What the next tick would refuse (say, a lane MAX on a shared state machine) is refused
        # now; a parameter that stays broken says what mends it.
        raise UsageError(f"not written: {problem.problem}") if sound else CliError(f"not written: {problem}")
    updated = checked_control(control.name, document)
    if write():
        control.write(updated)
    return control.name, updated


def steered_topology(args: argparse.Namespace, resources: Resources) -> Topology | None:
    """The members a change to a named pool, lane or gate is checked against (pool default's: None)."""
    return None if target_of(args, resources) is None else resources.topology()


def _problem(name: str, document: Document, topology: Topology | None) -> ControlError | None:
    """What a tick would refuse in ``document`` (None: nothing)."""
    try:
        control = checked_control(name, document)
        if topology is not None:
            steer(topology, control, name)
    except ControlError as error:
        return error
    return None


def target_of(args: argparse.Namespace, resources: Resources) -> tuple[str, str] | None:
    """What ``--pool``, ``--lane`` or ``--gate`` names: (``pools``, ``lanes`` or ``gates``, name).

    None for pool ``default``, which the top-level keys steer.
    """
    chosen = chosen_member(args)
    if chosen is None or chosen == ("pool", DEFAULT):
        return None
    kind, name = chosen
    member(resources, kind, name)  # an unknown name is a usage error
    return f"{kind}s", name


def entry_of(document: Document, target: tuple[str, str] | None) -> Document:
    """The object the target's keys are in (the top level for pool default), made if missing."""
    if target is None:
        return document
    kind, name = target
    entries = document.get(kind)
    if not isinstance(entries, dict):
        entries = document[kind] = {}
    entry = entries.get(name)
    if not isinstance(entry, dict):
        entry = entries[name] = {}
    return entry


def control_needs(args: argparse.Namespace, _resources: Resources) -> list[str]:
    """Live control needs the control parameter (and, for a pool, lane or gate, what finds the lanes)."""
    return ["control_parameter", *lanes_needs(args)]
