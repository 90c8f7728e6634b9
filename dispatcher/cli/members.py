"""``--pool``, ``--lane`` and ``--gate``: which member of the dispatcher a command acts on.

Every operations command names a member the same way, and an unknown name is the same
usage error everywhere: one line listing the names that are configured.
"""

from __future__ import annotations

import argparse

from dispatcher.cli.config import Resources
from dispatcher.cli.errors import UsageError
from dispatcher.core.kinds import KINDS as MEMBER_KINDS
from dispatcher.core.kinds import kind_of
from dispatcher.core.topology import Member, Pool, Topology

KINDS = ("pool", *(kind.name for kind in MEMBER_KINDS))
"""What an operations command may act on: a pool, or a member of any kind (``--lane``, ``--gate``)."""


def add_member_options(
    command: argparse.ArgumentParser,
    verb: str,
    *,
    pool: bool = False,
    default: str | None = None,
    required: bool = False,
) -> None:
    """``--lane NAME`` and ``--gate NAME`` (and ``--pool``, where it makes sense), at most one of them.

    ``default``: the kind (``pool`` or ``lane``) whose ``default`` the command acts on
    without any; ``required``: one of them must be given.
    """
    targets = command.add_mutually_exclusive_group(required=required)
    for kind in KINDS if pool else KINDS[1:]:
        note = f" (default: {kind} default)" if kind == default else ""
        targets.add_argument(f"--{kind}", metavar="NAME", help=f"{verb} this {kind}{note}")


def chosen_member(args: argparse.Namespace) -> tuple[str, str] | None:
    """(kind, name) of the ``--pool``/``--lane``/``--gate`` given, or None."""
    for kind in KINDS:
        name = getattr(args, kind, None)
        if name is not None:
            return kind, str(name)
    return None


def names_of(topology: Topology, kind: str) -> list[str]:
    """The configured names of one kind (``pool``, ``lane`` or ``gate``), in configuration order."""
    if kind == "pool":
        return [pool.name for pool in topology.pools]
    return list(topology.names(kind_of(kind).member))


def unknown_member(kind: str, name: str, topology: Topology) -> UsageError:
    """The usage error for a name that isn't configured: it lists the names that are.

    A lane's name given as a gate's, or a gate's as a lane's, says which it is.
    """
    listed = ", ".join(names_of(topology, kind)) or "none are configured"
    others = [each.name for each in MEMBER_KINDS if kind not in ("pool", each.name)]
    other = next((each for each in others if name in names_of(topology, each)), None)
    if other is not None:
        return UsageError(
            f"--{kind} {name}: {name} is a {other}, not a {kind} (use --{other} {name}; {kind}s: {listed})"
        )
    return UsageError(f"--{kind} {name}: no such {kind} ({kind}s: {listed})")


def member(resources: Resources, kind: str, name: str) -> Pool | Member:
    """The configured pool, lane or gate of that name; an unknown name is a usage error."""
    topology = resources.topology()
    found: dict[str, Pool | Member] = {pool.name: pool for pool in topology.pools}
    if kind != "pool":
        found = {each.name: each for each in topology.members_of(kind=kind_of(kind).member)}
    if name not in found:
        raise unknown_member(kind, name, topology)
    return found[name]


def named_member(args: argparse.Namespace, resources: Resources) -> Member | None:
    """The member a kind's option names (``--lane``, ``--gate``; None: none given, lane ``default``)."""
    chosen = chosen_member(args)
    if chosen is None:
        return None
    kind, name = chosen
    topology = resources.topology()
    try:
        return topology.member(name, kind_of(kind).member)
    except KeyError:
        raise unknown_member(kind, name, topology) from None


def lanes_needs(args: argparse.Namespace) -> list[str]:
    """What finding a named member needs: the default lane's settings (``LANES`` is read with them)."""
    if chosen_member(args) is None:
        return []
    return ["queue_url", "dead_letter_queue_url", "state_machine_arn"]
