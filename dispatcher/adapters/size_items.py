"""The item of a pool's sized executions (`dispatcher.core.sizes`), one per pool.

It lives in the ledger's partition under sort key ``~slots#<pool>``: after every record, so
the window each tick reads anyway brings it (no call of its own). Each sized execution is
an attribute of its own, ``s:<state machine name>:<execution name>`` → ``[slots, written
at]``, so a write is one `UpdateItem` that sets the round's and removes the ended ones,
whatever else another writer added: no read before it, no condition. No TTL: an execution
may run for a year; an entry goes once its execution is known to have ended.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from dispatcher.adapters.item_keys import number
from dispatcher.core.sizes import Reservation, SizeEntry

SIZES_KIND = "slots"
SIZES_PREFIX = "~slots#"
ENTRY_PREFIX = "s:"
RESERVED = "reserved"
"""The attribute of the pool's reservation: the large job its freed slots are kept for."""


def sizes_key(pool: str) -> str:
    """The sort key of ``pool``'s sized executions."""
    return f"{SIZES_PREFIX}{pool}"


def read_sizes(item: Mapping[str, Any]) -> tuple[str, dict[str, SizeEntry]]:
    """The pool and its sized executions (key → entry) an item holds."""
    entries: dict[str, SizeEntry] = {}
    for attribute, value in item.items():
        if attribute.startswith(ENTRY_PREFIX):
            slots, at = value["L"]
            entries[attribute.removeprefix(ENTRY_PREFIX)] = SizeEntry(int(slots["N"]), float(at["N"]))
    return item["pool"]["S"], entries


def read_reservation(item: Mapping[str, Any]) -> Reservation | None:
    """The reservation an item of `sizes_key` holds (None: none)."""
    held = item.get(RESERVED, {}).get("M")
    if held is None:
        return None
    return Reservation(
        held["lane"]["S"], held["name"]["S"], int(held["slots"]["N"]), float(held["since"]["N"])
    )


def reservation_update(key: Mapping[str, Any], pool: str, reservation: Reservation | None) -> dict[str, Any]:
    """The `UpdateItem` request that sets ``pool``'s reservation (None: removes it)."""
    if reservation is None:
        return {
            "Key": dict(key),
            "UpdateExpression": "REMOVE #reserved",
            "ExpressionAttributeNames": {"#reserved": RESERVED},
        }
    held = {
        "lane": {"S": reservation.lane},
        "name": {"S": reservation.name},
        "slots": {"N": str(reservation.slots)},
        "since": number(reservation.since),
    }
    return {
        "Key": dict(key),
        "UpdateExpression": "SET #reserved = :reserved, #kind = :kind, #pool = :pool",
        "ExpressionAttributeNames": {"#reserved": RESERVED, "#kind": "kind", "#pool": "pool"},
        "ExpressionAttributeValues": {
            ":reserved": {"M": held},
            ":kind": {"S": SIZES_KIND},
            ":pool": {"S": pool},
        },
    }


def sizes_update(
    key: Mapping[str, Any], pool: str, added: Mapping[str, SizeEntry], removed: Collection[str]
) -> dict[str, Any]:
    """The `UpdateItem` request that adds ``added`` to ``pool``'s item and removes ``removed``."""
    names: dict[str, str] = {"#kind": "kind", "#pool": "pool"}
    values: dict[str, Any] = {":kind": {"S": SIZES_KIND}, ":pool": {"S": pool}}
    sets = ["#kind = :kind", "#pool = :pool"]
    for index, (entry_key, entry) in enumerate(added.items()):
        names[f"#a{index}"] = ENTRY_PREFIX + entry_key
        values[f":a{index}"] = {"L": [{"N": str(entry.slots)}, number(entry.recorded_at)]}
        sets.append(f"#a{index} = :a{index}")
    gone = [entry_key for entry_key in removed if entry_key not in added]
    for index, entry_key in enumerate(gone):
        names[f"#r{index}"] = ENTRY_PREFIX + entry_key
    expression = "SET " + ", ".join(sets)
    if gone:
        expression += " REMOVE " + ", ".join(f"#r{index}" for index in range(len(gone)))
    return {
        "Key": dict(key),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
