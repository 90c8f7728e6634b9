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

from dispatcher.adapters.item_keys import INSIDE_KIND, inside_key, number, sort_key, stored_time
from dispatcher.adapters.table import INSIDE_RECORD_LIFETIME_SECONDS
from dispatcher.core.counting import RecordedStart
from dispatcher.core.gates import Confirmation
from dispatcher.core.tenants import Hold, held_key

CONFIRMED_KIND = "confirmed"
"""A gate's item naming the admissions of one round that `SendTaskSuccess` took."""
HELD_KIND = "held"
"""A member's item naming its job held for its group's limit (one a group): how to show it again."""


def inside_partition(own: str, gate: str) -> str:
    """The partition key of the executions inside one gate of a dispatcher (keyed by ``own``)."""
    return f"{INSIDE_KIND}#{gate}#{own}"


def inside_item(own: str, record: RecordedStart) -> dict[str, Any]:
    """A roster's record (of ``record.gate``: a gate's admission, a tenant lane's start), as one item.

    The execution's place until it leaves.
    """
    if record.gate is None:
        raise ValueError(f"{record.name} is a start, not an admission (nor a start a roster keeps)")
    item: dict[str, Any] = {
        "pk": {"S": inside_partition(own, record.gate)},
        "sk": {"S": record.name},
        "kind": {"S": INSIDE_KIND},
        "gate": {"S": record.gate},
        "recorded_at": number(record.recorded_at),
        "expires_at": {"N": str(int(record.recorded_at) + INSIDE_RECORD_LIFETIME_SECONDS)},
    }
    if record.token is not None:
        item["token"] = {"S": record.token}
    if record.group is not None:
        item["group"] = {"S": record.group}
    if record.lane is not None:
        item["lane"] = {"S": record.lane}
    return item


def inside_item_key(own: str, record: RecordedStart) -> dict[str, Any]:
    """The key of an admission's item."""
    item = inside_item(own, record)
    return {"pk": item["pk"], "sk": item["sk"]}


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
    }


def read_inside(
    items: Iterable[Mapping[str, Any]], gate: str, state_machine_arn: str
) -> tuple[list[RecordedStart], list[Confirmation], list[Hold]]:
    """A member's roster as read: its records (a gate's executions inside, a lane's), confirmations, holds."""
    records: list[RecordedStart] = []
    confirmations: list[Confirmation] = []
    holds: list[Hold] = []
    for item in items:
        kind = item.get("kind", {}).get("S")
        if kind == HELD_KIND:
            holds.append(
                Hold(
                    group=item["group"]["S"],
                    message_id=item["message_id"]["S"],
                    receipt_handle=item["receipt_handle"]["S"],
                    held_at=float(item["recorded_at"]["N"]),
                )
            )
        elif kind == CONFIRMED_KIND:
            confirmations.append(
                Confirmation(
                    key=item["sk"]["S"],
                    confirmed_at=float(item["recorded_at"]["N"]),
                    names=frozenset(item["names"]["SS"]),
                )
            )
        elif kind == INSIDE_KIND:
            records.append(
                RecordedStart(
                    name=item["sk"]["S"],
                    recorded_at=float(item["recorded_at"]["N"]),
                    sort_key=inside_key(gate, item["sk"]["S"]),
                    group=item.get("group", {}).get("S"),
                    state_machine_arn=state_machine_arn,
                    gate=gate,
                    token=item.get("token", {}).get("S"),
                    lane=item.get("lane", {}).get("S"),
                )
            )
    return records, confirmations, holds
