"""A member's roster in the state table, any kind's: its partition, and its jobs held for a group's limit.

Every member that keeps a roster (a gate's admissions: `dispatcher.adapters.gate_items`; a
tenant lane's starts: `dispatcher.adapters.lane_roster_items`) keeps it in a partition of its
own, with one item per group whose job is held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatcher.adapters.item_keys import INSIDE_KIND, number
from dispatcher.adapters.table import INSIDE_RECORD_LIFETIME_SECONDS
from dispatcher.core.tenants import Hold, held_key

HELD_KIND = "held"
"""A member's item naming its job held for its group's limit (one a group): how to show it again."""


def inside_partition(own: str, member: str) -> str:
    """The partition of one member's roster (a gate's, a tenant lane's) in the dispatcher keyed ``own``."""
    return f"{INSIDE_KIND}#{member}#{own}"


def held_item(own: str, member: str, hold: Hold) -> dict[str, Any]:
    """A job held for its group's limit, as one item of ``member``'s roster (a later hold replaces it)."""
    return {
        "pk": {"S": inside_partition(own, member)},
        "sk": {"S": held_key(hold.group)},
        "kind": {"S": HELD_KIND},
        "group": {"S": hold.group},
        "message_id": {"S": hold.message_id},
        "receipt_handle": {"S": hold.receipt_handle},
        "recorded_at": number(hold.held_at),
        "expires_at": {"N": str(int(hold.held_at) + INSIDE_RECORD_LIFETIME_SECONDS)},
        **({} if hold.name is None else {"name": {"S": hold.name}}),
        **({} if hold.slots == 1 else {"slots": {"N": str(hold.slots)}}),
    }


def hold_of(item: Mapping[str, Any]) -> Hold:
    """The held job a `held_item` notes."""
    return Hold(
        group=item["group"]["S"],
        message_id=item["message_id"]["S"],
        receipt_handle=item["receipt_handle"]["S"],
        held_at=float(item["recorded_at"]["N"]),
        name=item["name"]["S"] if "name" in item else None,
        slots=int(item["slots"]["N"]) if "slots" in item else 1,
    )
