"""The members' queues as the state table remembers them: what a lane or gate removed from ``LANES`` left.

Once a lane is taken out of ``LANES`` nothing receives from its queue, and the function no
longer knows its URL. So a tick keeps every lane's and gate's queues in one item of the
ledger's partition (read with the window it reads anyway: no call of its own; written only
when the members change), and keeps the entries of members that are gone: each tick warns
of them, `status` counts the jobs and dead letters waiting there, `forget` drops one.
"""

from __future__ import annotations

from collections.abc import Mapping

from dispatcher.core.kinds import KINDS
from dispatcher.core.topology import Topology

Queues = dict[str, dict[str, str]]
"""``lanes.<name>`` / ``gates.<name>`` → its ``queue_url`` and ``dead_letter_queue_url``."""


def members_of(topology: Topology) -> Queues:
    """Every member's queues, as the item keeps them (under its kind's section, kind after kind)."""
    return {
        f"{kind.plural}.{member.name}": {
            "queue_url": member.queue_url,
            "dead_letter_queue_url": member.dead_letter_queue_url,
        }
        for kind in KINDS
        for member in topology.members_of(kind=kind.member)
    }


def removed(recorded: Mapping[str, Mapping[str, str]], current: Queues) -> Queues:
    """The recorded members no longer configured, each with the queues it had."""
    return {key: dict(queues) for key, queues in recorded.items() if key not in current}


def to_record(recorded: Mapping[str, Mapping[str, str]] | None, current: Queues) -> Queues | None:
    """What the item should hold now (the removed members kept), or None when it holds that already."""
    kept = {key: dict(queues) for key, queues in (recorded or {}).items()}
    updated = {**kept, **current}
    return None if recorded is not None and updated == kept else updated
