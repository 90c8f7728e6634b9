"""A pool's item of sized executions and its reservation, as DynamoDB's `UpdateItem` leaves it.

The adapter writes it with expressions (`dispatcher.adapters.size_items`); the in-memory
table applies the same changes to the stored item, so the window's read brings what AWS would.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from dispatcher.adapters.item_keys import number
from dispatcher.adapters.size_items import ENTRY_PREFIX, RESERVED
from dispatcher.core.sizes import Reservation, SizeEntry


def sized_item(
    item: dict[str, Any], added: Mapping[str, SizeEntry], removed: Collection[str]
) -> dict[str, Any]:
    """The item with ``added`` set and ``removed`` gone (a key in both is set, as the adapter's)."""
    for key in removed:
        if key not in added:
            item.pop(ENTRY_PREFIX + key, None)
    for key, entry in added.items():
        item[ENTRY_PREFIX + key] = {"L": [{"N": str(entry.slots)}, number(entry.recorded_at)]}
    return item


def reserved_item(item: dict[str, Any], reservation: Reservation | None) -> dict[str, Any]:
    """The item with its reservation set (None: removed)."""
    if reservation is None:
        item.pop(RESERVED, None)
        return item
    item[RESERVED] = {
        "M": {
            "lane": {"S": reservation.lane},
            "name": {"S": reservation.name},
            "slots": {"N": str(reservation.slots)},
            "since": number(reservation.since),
        }
    }
    return item
