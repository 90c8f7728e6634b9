"""The items of a pool's sized executions (`dispatcher.core.sizes`): packs, and the reservation.

They live in the ledger's partition under sort keys beginning ``~slots#<pool>``: after every
record, so the window each tick reads anyway brings them (no call of their own).

- A **pack** (``~slots#<pool>#<written at>#<token>``): a round's sized starts of the pool,
  put before the round's calls: when it was written (``at``) and, for each state machine, a
  map ``m:<state machine name>`` → execution name → slots (about 40 bytes an execution, read
  by every tick). Small (a round's few sized starts), so its write costs one write unit,
  where one item of every sized execution cost its whole size at each write. It is deleted
  whole once every execution it names is known to have ended. No TTL: an execution may run
  for a year.
- The pool's item (``~slots#<pool>``) holds its reservation, when it has one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from dispatcher.adapters.item_keys import number
from dispatcher.core.sizes import Reservation, SizeEntry

SIZES_KIND = "slots"
SIZES_PREFIX = "~slots#"
MACHINE_PREFIX = "m:"
RESERVED = "reserved"
"""The attribute of the pool's reservation: the large job its freed slots are kept for."""


def sizes_key(pool: str) -> str:
    """The sort key of ``pool``'s item (its reservation)."""
    return f"{SIZES_PREFIX}{pool}"


def pack_key(pool: str, written_at: float) -> str:
    """A new pack's sort key: the pool's, when it was written, and a token unique to the write."""
    return f"{sizes_key(pool)}#{written_at:017.6f}#{uuid.uuid4().hex[:12]}"


def sizes_pack(partition: str, pool: str, added: Mapping[str, SizeEntry]) -> dict[str, Any]:
    """One round's sized executions of ``pool`` (key → entry) as a new pack item."""
    written_at = min(entry.recorded_at for entry in added.values())
    machines: dict[str, dict[str, Any]] = {}
    for key, entry in added.items():
        machine, _, name = key.partition(":")
        machines.setdefault(MACHINE_PREFIX + machine, {})[name] = {"N": str(entry.slots)}
    return {
        "pk": {"S": partition},
        "sk": {"S": pack_key(pool, written_at)},
        "kind": {"S": SIZES_KIND},
        "pool": {"S": pool},
        "at": number(written_at),
        **{attribute: {"M": names} for attribute, names in machines.items()},
    }


def read_sizes(item: Mapping[str, Any]) -> tuple[str, dict[str, SizeEntry]]:
    """The pool and the sized executions (key → entry, with its pack) an item holds (a reservation: none)."""
    entries: dict[str, SizeEntry] = {}
    pack = item["sk"]["S"]
    for attribute, value in item.items():
        if attribute.startswith(MACHINE_PREFIX):
            machine = attribute.removeprefix(MACHINE_PREFIX)
            at = float(item["at"]["N"])
            for name, slots in value["M"].items():
                entries[f"{machine}:{name}"] = SizeEntry(int(slots["N"]), at, pack)
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
