"""How the state table keeps jobs that never started: pending cancellations and job records. Pure.

- The pending cancellations of every lane live in the start ledger's partition, under sort
  keys that sort after every record's: the consistent read of the review window that every
  tick makes anyway (``sk >= oldest``) brings them, at no call of their own. Names are
  packed: the names a lane's producers cancel in one hour share an item of
  ``NAME_SHARDS`` (``~cancel#<lane>#h#<hour>#<shard>``, a map of name → when), so a name
  costs the tick's read its own bytes and no item's keys (about 50 bytes, not 150); a
  message group's is an item (``~cancel#<lane>#g#<group>``). An item lives 14 days after
  its last cancellation (DynamoDB's TTL): a producer's re-send under a cancelled name, or a
  message redelivered, is cancelled too; every cancellation made in the last 14 days is read
  by every tick. A name whose hour's item is full (400 KB: some 8,000 names a shard) gets
  an item of its own (``~cancel#<lane>#n#<name>``, as older releases wrote every name).
- ``jobs#<key>``: a record per job (``<lane>#<name>``) that was cancelled, expired or
  dead-lettered, which ``dispatcher job`` reads, kept 14 days; and beside it
  (``<lane>#<name>#dropped``) when a tick dropped a job for its name's cancellation, and
  when that job was sent.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

from dispatcher.adapters.item_keys import number
from dispatcher.adapters.state_items import (
    CANCEL_KIND,
    GROUP_KIND,
    NAME_KIND,
    NAMES_KIND,
    PENDING_PREFIX,
    partition,
    pending_key,
    read_pending,
)
from dispatcher.core.jobs import (
    CANCELLATION_LIFETIME_SECONDS,
    Dropped,
    GroupCancellation,
    JobRecord,
    JobState,
)

__all__ = [
    "CANCEL_KIND",
    "GROUP_KIND",
    "NAMES_KIND",
    "NAME_KIND",
    "PENDING_PREFIX",
    "cancels_partition",
    "dropped_item",
    "dropped_key",
    "dropped_of",
    "expires",
    "jobs_partition",
    "kept_item",
    "kept_key",
    "pending_group_item",
    "pending_key",
    "pending_name_item",
    "pending_names_key",
    "read_pending",
    "record_item",
    "record_key",
    "record_of",
]


def cancels_partition(key: str) -> str:
    """The partition of one dispatcher's pending cancellations: its start ledger's."""
    return partition(key)


def jobs_partition(key: str) -> str:
    """The partition of one dispatcher's job records."""
    return f"jobs#{key}"


def expires(now: float) -> dict[str, str]:
    """The TTL of what is kept 14 days from ``now``."""
    return {"N": str(int(now) + CANCELLATION_LIFETIME_SECONDS)}


def pending_name_item(key: str, lane: str, name: str, now: float) -> dict[str, Any]:
    """A job's pending cancellation: its name, and nothing a tick needs beyond it."""
    return {
        "pk": {"S": cancels_partition(key)},
        "sk": {"S": pending_key(lane, NAME_KIND, name)},
        "kind": {"S": CANCEL_KIND},
        "expires_at": expires(now),
    }


NAME_SHARDS = 4
"""Items an hour's name cancellations of one lane are spread over (by the name's CRC-32)."""
HOUR_SECONDS = 3600


def pending_names_key(lane: str, name: str, at: float) -> str:
    """The sort key of the item that keeps ``name``'s cancellation made at ``at``: its hour's, its shard."""
    shard = zlib.crc32(name.encode()) % NAME_SHARDS
    return pending_key(lane, NAMES_KIND, f"{int(at // HOUR_SECONDS)}#{shard}")


def pending_group_item(key: str, lane: str, group: GroupCancellation) -> dict[str, Any]:
    """A message group's cancellation: its jobs sent at or before ``before``."""
    return {
        "pk": {"S": cancels_partition(key)},
        "sk": {"S": pending_key(lane, GROUP_KIND, group.group)},
        "kind": {"S": CANCEL_KIND},
        "before": number(group.before),
        "reason": {"S": group.reason},
        "expires_at": expires(group.before),
    }


def record_key(lane: str, name: str) -> str:
    """A job record's sort key."""
    return f"{lane}#{name}"


def dropped_key(lane: str, name: str) -> str:
    """The sort key of what a tick dropped for a name's cancellation (a name holds no ``#``)."""
    return f"{record_key(lane, name)}#dropped"


def dropped_item(key: str, dropped: Dropped) -> dict[str, Any]:
    """A job a tick dropped for its name's cancellation, as one item."""
    item: dict[str, Any] = {
        "pk": {"S": jobs_partition(key)},
        "sk": {"S": dropped_key(dropped.lane, dropped.name)},
        "at": number(dropped.at),
        "expires_at": expires(dropped.at),
    }
    if dropped.sent_at is not None:
        item["sent_at"] = number(dropped.sent_at)
    return item


def dropped_of(item: Mapping[str, Any]) -> Dropped:
    """The drop an item holds."""
    lane, name, _ = item["sk"]["S"].split("#", 2)
    sent_at = item.get("sent_at", {}).get("N")
    return Dropped(lane, name, float(item["at"]["N"]), None if sent_at is None else float(sent_at))


def kept_item(key: str, kept: JobRecord | Dropped) -> dict[str, Any]:
    """What a tick keeps of a job that never started, as one item: its record, or its drop."""
    return dropped_item(key, kept) if isinstance(kept, Dropped) else record_item(key, kept)


def kept_key(kept: JobRecord | Dropped) -> str:
    """Its item's sort key."""
    return (
        dropped_key(kept.lane, kept.name) if isinstance(kept, Dropped) else record_key(kept.lane, kept.name)
    )


def record_item(key: str, record: JobRecord) -> dict[str, Any]:
    """A job record as one item."""
    item: dict[str, Any] = {
        "pk": {"S": jobs_partition(key)},
        "sk": {"S": record_key(record.lane, record.name)},
        "state": {"S": str(record.state)},
        "reason": {"S": record.reason},
        "at": number(record.at),
        "expires_at": expires(record.at),
    }
    if record.deadline is not None:
        item["deadline"] = number(record.deadline)
    if record.stopped:
        item["stopped"] = {"BOOL": True}
    return item


def record_of(item: Mapping[str, Any]) -> JobRecord:
    """The job record an item holds."""
    lane, name = item["sk"]["S"].split("#", 1)
    return JobRecord(
        lane=lane,
        name=name,
        state=JobState(item["state"]["S"]),
        reason=item.get("reason", {}).get("S", ""),
        at=float(item["at"]["N"]),
        deadline=float(item["deadline"]["N"]) if "deadline" in item else None,
        stopped=bool(item.get("stopped", {}).get("BOOL", False)),
    )
