"""A pool's reservation item, as DynamoDB's `UpdateItem` leaves it.

The adapter writes it with an expression (`dispatcher.adapters.size_items`); the in-memory
table applies the same change to the stored item, so the window's read brings what AWS would.
"""

from __future__ import annotations

from typing import Any

from dispatcher.adapters.item_keys import number
from dispatcher.adapters.size_items import RESERVED
from dispatcher.core.sizes import Reservation


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
