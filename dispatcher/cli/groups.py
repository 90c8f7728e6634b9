"""`dispatcher status --groups`: each member's message groups, RUNNING as the tick counts it, held jobs.

RUNNING is in slots (a job's ``Slots``, 1 without; a gate's admission 1), with the count of
executions beside it, as `status` shows a pool.

A lane that counts by group (``max_per_group`` or ``fair_share``) and every gate keep a
roster in the state table: an item per execution (started from the lane, or inside the
gate) until it ends, and an item per group whose job is held for the group's limit. This
reads those rosters: what the tick counts, not a listing of Step Functions.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TextIO

from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.members import chosen_member
from dispatcher.cli.output import table
from dispatcher.cli.status_kinds import CLI_KINDS
from dispatcher.core.control import steer
from dispatcher.core.rosters import group_counts
from dispatcher.core.topology import Member


@dataclass(frozen=True)
class GroupRow:
    """One member's message group: the slots its executions hold of the member's, its held jobs."""

    member: str
    group: str
    running: int
    """Slots its executions hold (the sum of their sizes)."""
    held: int
    executions: int
    """Its executions holding them."""


def _wanted(chosen: tuple[str, str] | None) -> Callable[[Member], bool]:
    """Whether a member is one ``--pool``/``--lane``/``--gate`` chose (all of them when none is given)."""
    if chosen is None:
        return lambda _member: True
    kind, name = chosen
    if kind == "pool":
        return lambda member: member.pool == name
    return lambda member: member.name == name


def read_groups(aws: Aws, resources: Resources, chosen: tuple[str, str] | None) -> list[GroupRow]:
    """Every counted member's groups, most running first (then most held, then by name)."""
    control = control_parameter(aws, resources)
    read = None if control is None else control.read()
    environment_max = resources.max_concurrency or 0  # MAX doesn't matter here
    topology = steer(resources.topology(environment_max), read, resources.control_parameter)
    resources.need("state_table")  # where every roster is kept
    rows: list[GroupRow] = []
    for kind in CLI_KINDS:
        for member, roster in kind.rosters(aws, resources, topology, _wanted(chosen)):
            running = group_counts(roster.entries)
            executions = Counter(entry.group for entry in roster.entries if entry.group is not None)
            held = Counter(hold.group for hold in roster.held)
            rows += [
                GroupRow(member.name, group, running[group], held[group], executions[group])
                for group in sorted(running.keys() | held.keys())
            ]
    return sorted(rows, key=lambda row: (-row.running, -row.held, row.member, row.group))


def top(text: str) -> int:
    """``--top N``: a whole number of rows, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("--top takes 1 or more")
    return value


def print_groups(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Print the groups once (``--top N``: the first N), as a table or ``--json``."""
    rows = read_groups(aws, resources, chosen_member(args))
    if args.top is not None:
        rows = rows[: args.top]
    if args.json:
        out.write(json.dumps({"groups": [asdict(row) for row in rows]}) + "\n")
        return 0
    if not rows:
        out.write(
            "no message group holds a place or waits (members that count by group: tenant lanes, gates)\n"
        )
        return 0
    headers = ["MEMBER", "GROUP", "RUNNING", "HELD"]
    cells = [[row.member, row.group, _running(row), str(row.held)] for row in rows]
    out.write(table(headers, cells) + "\n")
    return 0


def _running(row: GroupRow) -> str:
    """A group's RUNNING cell: its slots, and its executions when they differ (``7 (3 executions)``)."""
    if row.running == row.executions:
        return str(row.running)
    plural = "" if row.executions == 1 else "s"
    return f"{row.running} ({row.executions} execution{plural})"
