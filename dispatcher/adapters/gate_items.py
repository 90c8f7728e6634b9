"""A gate's items in the state table: who is inside it, and the rounds `SendTaskSuccess` took.

A gate's admissions are items of their own, one an execution inside, under a partition
key of the gate's (``inside#<gate>#<the default lane's state machine ARN>``: each gate's
writes have a partition's units to themselves), keyed by the execution's name: admitting
an execution again overwrites its item, and a release or an end deletes it. An item holds
when it was admitted and a digest of the task token, and lives until its execution leaves
(a year at most: the TTL is a backstop). Once a round's `SendTaskSuccess` calls are made,
one item (``~confirmed#…``, after every name) names the admissions they took, before their
requests are deleted: an admission no such item names may have its request back on the
queue (its tick died, or its call failed), and the gate looks for it even with no free place.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dispatcher.adapters.item_keys import INSIDE_KIND, number, sort_key, stored_time
from dispatcher.adapters.roster_items import HELD_KIND, hold_of, inside_partition
from dispatcher.adapters.table import INSIDE_RECORD_LIFETIME_SECONDS
from dispatcher.core.gates import Confirmation, GateEntry
from dispatcher.core.rosters import RosterEntry
from dispatcher.core.tenants import Hold
from dispatcher.core.topology import Member

CONFIRMED_KIND = "confirmed"
"""A gate's item naming the admissions of one round that `SendTaskSuccess` took."""


def inside_item(own: str, entry: RosterEntry) -> dict[str, Any]:
    """A roster's entry (a gate's admission, with its token; a tenant lane's start), as one item.

    The execution's place until it leaves. An item names its member (``gate``, for either kind)
    and, for a lane's, the lane that started it.
    """
    item: dict[str, Any] = {
        "pk": {"S": inside_partition(own, entry.member)},
        "sk": {"S": entry.name},
        "kind": {"S": INSIDE_KIND},
        "gate": {"S": entry.member},
        "recorded_at": number(entry.recorded_at),
        "expires_at": {"N": str(int(entry.recorded_at) + INSIDE_RECORD_LIFETIME_SECONDS)},
    }
    if isinstance(entry, GateEntry):
        item["token"] = {"S": entry.token}
    if entry.group is not None:
        item["group"] = {"S": entry.group}
    if not isinstance(entry, GateEntry):
        item["lane"] = {"S": entry.member}
    return item


def inside_item_key(own: str, entry: RosterEntry) -> dict[str, Any]:
    """The key of an entry's item."""
    return {"pk": {"S": inside_partition(own, entry.member)}, "sk": {"S": entry.name}}


def confirmation_item(own: str, gate: str, names: Sequence[str], now: float) -> dict[str, Any]:
    """Admissions into ``gate`` that `SendTaskSuccess` took (one round's), as one item of its partition.

    Its key begins with ``~``, which no execution name holds, so it sorts after every admission.
    """
    now = stored_time(now)
    return {
        "pk": {"S": inside_partition(own, gate)},
        "sk": {"S": f"~{CONFIRMED_KIND}#{sort_key(now, names[0])}#{uuid.uuid4().hex[:12]}"},
        "kind": {"S": CONFIRMED_KIND},
        "recorded_at": number(now),
        "expires_at": {"N": str(int(now) + INSIDE_RECORD_LIFETIME_SECONDS)},
        "names": {"SS": sorted(set(names))},
    }


def read_inside(
    items: Iterable[Mapping[str, Any]], member: Member
) -> tuple[list[RosterEntry], list[Confirmation], list[Hold]]:
    """A member's roster as read: its entries (a gate's admissions, with tokens), confirmations, holds."""
    records: list[RosterEntry] = []
    confirmations: list[Confirmation] = []
    holds: list[Hold] = []
    for item in items:
        kind = item.get("kind", {}).get("S")
        if kind == HELD_KIND:
            holds.append(hold_of(item))
        elif kind == CONFIRMED_KIND:
            confirmations.append(
                Confirmation(
                    key=item["sk"]["S"],
                    confirmed_at=float(item["recorded_at"]["N"]),
                    names=frozenset(item["names"]["SS"]),
                )
            )
        elif kind == INSIDE_KIND:
            fields = {
                "member": member.name,
                "name": item["sk"]["S"],
                "recorded_at": float(item["recorded_at"]["N"]),
                "state_machine_arn": member.state_machine_arn,
                "group": item.get("group", {}).get("S"),
            }
            # A tenant lane's item names its lane; a gate's holds the token it was admitted with.
            if "lane" in item:
                records.append(RosterEntry(**fields))
            else:
                records.append(GateEntry(**fields, token=item.get("token", {}).get("S", "")))
    return records, confirmations, holds
