"""A tenant lane's roster items: packs of entries, gone items, the head, holds (`core.lane_rosters`).

They share the member's partition (``inside#<lane>#<the default lane's state machine ARN>``)
with the lane's held jobs. A pack's key is its entries' moment and first name; a gone
item's, a head's and a held job's begin with ``~``, after every name. An older release kept
an item an entry (``inside``, keyed by the execution's name): it is still read, as an entry
of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dispatcher.adapters.item_keys import INSIDE_KIND, number
from dispatcher.adapters.roster_items import HELD_KIND, hold_of, inside_partition
from dispatcher.adapters.table import INSIDE_RECORD_LIFETIME_SECONDS
from dispatcher.core.lane_rosters import PLACE
from dispatcher.core.rosters import RosterEntry
from dispatcher.core.tenants import Hold

ENTRIES_KIND, GONE_KIND, HEAD_KIND = "entries", "gone", "head"
HEAD_KEY = "~head"
"""The head item's key: the version the roster was last read at (one item a lane)."""


def gone_key() -> str:
    """A new gone item's key (unique to its write)."""
    return f"~{GONE_KIND}#{uuid.uuid4().hex[:16]}"


def pack_item(own: str, entries: Sequence[RosterEntry]) -> dict[str, Any]:
    """One pack (entries of one moment, in place order, keys from `packed`), as one item."""
    first = entries[0]
    pack = first.key.rpartition(PLACE)[0]
    return {
        "pk": {"S": inside_partition(own, first.member)},
        "sk": {"S": pack},
        "kind": {"S": ENTRIES_KIND},
        "recorded_at": number(first.recorded_at),
        "expires_at": {"N": str(int(first.recorded_at) + INSIDE_RECORD_LIFETIME_SECONDS)},
        "names": {"L": [{"S": entry.name} for entry in entries]},
        "groups": {"L": [{"NULL": True} if entry.group is None else {"S": entry.group} for entry in entries]},
        **_sizes(entries),
    }


def _sizes(entries: Sequence[RosterEntry]) -> dict[str, Any]:
    """A pack's sizes, place by place, when one of its jobs takes more than one slot (else nothing)."""
    if all(entry.slots == 1 for entry in entries):
        return {}
    return {"slots": {"L": [{"N": str(entry.slots)} for entry in entries]}}


def packs_of(entries: Iterable[RosterEntry]) -> list[list[RosterEntry]]:
    """Keyed entries in the packs that hold them, each in place order."""
    packs: dict[str, list[RosterEntry]] = {}
    for entry in entries:
        packs.setdefault(entry.key.rpartition(PLACE)[0], []).append(entry)
    return [sorted(pack, key=lambda entry: int(entry.key.rpartition(PLACE)[2])) for pack in packs.values()]


def gone_item(
    own: str, member: str, key: str, gone: Mapping[str, Sequence[int]], now: float
) -> dict[str, Any]:
    """Entries that left in one tick (pack → places), as one item."""
    return {
        "pk": {"S": inside_partition(own, member)},
        "sk": {"S": key},
        "kind": {"S": GONE_KIND},
        "recorded_at": number(now),
        "expires_at": {"N": str(int(now) + INSIDE_RECORD_LIFETIME_SECONDS)},
        "left": {"M": {pack: {"NS": [str(place) for place in places]} for pack, places in gone.items()}},
    }


def head_item(own: str, member: str, version: str) -> dict[str, Any]:
    """The roster's head: the version its keeper read it at."""
    return {
        "pk": {"S": inside_partition(own, member)},
        "sk": {"S": HEAD_KEY},
        "kind": {"S": HEAD_KIND},
        "version": {"S": version},
    }


def item_key(own: str, member: str, key: str) -> dict[str, Any]:
    """The DynamoDB key of one of the member's items."""
    return {"pk": {"S": inside_partition(own, member)}, "sk": {"S": key}}


def _pack_entries(item: Mapping[str, Any], member: str, state_machine_arn: str) -> list[RosterEntry]:
    """The entries one pack holds, keyed by its key and their places (sizes: 1 where it stores none)."""
    key = item["sk"]["S"]
    recorded_at = float(item["recorded_at"]["N"])
    names = item["names"]["L"]
    sizes = item.get("slots", {}).get("L") or [{"N": "1"}] * len(names)
    return [
        RosterEntry(
            member=member,
            name=name["S"],
            recorded_at=recorded_at,
            state_machine_arn=state_machine_arn,
            group=group.get("S"),
            slots=int(size["N"]),
            key=f"{key}{PLACE}{place}",
        )
        for place, (name, group, size) in enumerate(zip(names, item["groups"]["L"], sizes, strict=True))
    ]


def read_packed(
    items: Iterable[Mapping[str, Any]], member: str, state_machine_arn: str
) -> tuple[list[RosterEntry], dict[str, dict[str, list[int]]], list[Hold], str | None]:
    """A lane's roster as its items hold it: entries (keyed), gone items, holds, and the head's version."""
    entries: list[RosterEntry] = []
    gone: dict[str, dict[str, list[int]]] = {}
    holds: list[Hold] = []
    version = None
    for item in items:
        kind = item.get("kind", {}).get("S")
        key = item["sk"]["S"]
        if kind == ENTRIES_KIND:
            entries += _pack_entries(item, member, state_machine_arn)
        elif kind == GONE_KIND:
            gone[key] = {
                pack: [int(place) for place in places["NS"]] for pack, places in item["left"]["M"].items()
            }
        elif kind == INSIDE_KIND:
            entries.append(
                RosterEntry(
                    member=member,
                    name=key,
                    recorded_at=float(item["recorded_at"]["N"]),
                    state_machine_arn=state_machine_arn,
                    group=item.get("group", {}).get("S"),
                    key=key,
                )
            )
        elif kind == HELD_KIND:
            holds.append(hold_of(item))
        elif kind == HEAD_KIND:
            version = item["version"]["S"]
    return entries, gone, holds, version
