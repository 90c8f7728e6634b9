"""The item of an adaptive pool's limit L (`dispatcher.core.adaptive.LimitState`), one per pool.

It lives in the ledger's partition under sort key ``~limit#<pool>``: after every record, so
the window each tick reads anyway brings it (no call of its own to read it). A write is a
``PutItem`` on the condition that its ``version`` is the one read: two writers (an
overlapping tick, `dispatcher reset-limit`) never both apply a change made from one read.
No TTL: L survives cold starts and deploys, clamped into the pool's bounds as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatcher.adapters.item_keys import number
from dispatcher.core.adaptive import LimitState

LIMIT_KIND = "limit"
LIMIT_PREFIX = "~limit#"


def limit_key(pool: str) -> str:
    """The sort key of ``pool``'s limit."""
    return f"{LIMIT_PREFIX}{pool}"


def limit_item(partition_key: str, pool: str, state: LimitState, now: float) -> dict[str, Any]:
    """``pool``'s limit as an item of the ledger's partition (written at ``now``)."""
    item: dict[str, Any] = {
        "pk": {"S": partition_key},
        "sk": {"S": limit_key(pool)},
        "kind": {"S": LIMIT_KIND},
        "pool": {"S": pool},
        "limit": {"N": str(state.limit)},
        "version": {"N": str(state.version)},
        "changed_at": number(state.changed_at),
        "clean": {"N": str(state.clean)},
        "counted_through": number(state.counted_through),
        "since": number(state.since),
        "probing": {"BOOL": state.probing},
        "step": {"N": str(state.step)},
        "evidence": {"N": str(state.evidence)},
        "written_at": number(now),
    }
    if state.peak is not None:
        item["peak"] = {"N": str(state.peak)}
    if state.signal_at is not None:
        item["signal_at"] = number(state.signal_at)
    if state.floor_since is not None:
        item["floor_since"] = number(state.floor_since)
    if state.cut_by is not None:
        item["cut_by"] = number(state.cut_by)
    if state.cut_execution is not None:
        item["cut_execution"] = {"S": state.cut_execution}
    return item


def write_condition(previous: LimitState | None) -> dict[str, Any]:
    """The condition of a write made from ``previous`` (None: there was no item)."""
    if previous is None:
        return {"ConditionExpression": "attribute_not_exists(sk)"}
    return {
        "ConditionExpression": "#version = :version",
        "ExpressionAttributeNames": {"#version": "version"},
        "ExpressionAttributeValues": {":version": {"N": str(previous.version)}},
    }


def read_limit(item: Mapping[str, Any]) -> tuple[str, LimitState]:
    """The pool and the limit an item of `limit_item` holds."""
    cut_by = item.get("cut_by", {}).get("N")
    peak = item.get("peak", {}).get("N")
    signal_at = item.get("signal_at", {}).get("N")
    floor_since = item.get("floor_since", {}).get("N")
    return item["pool"]["S"], LimitState(
        limit=int(item["limit"]["N"]),
        version=int(item["version"]["N"]),
        changed_at=float(item["changed_at"]["N"]),
        cut_by=None if cut_by is None else float(cut_by),
        cut_execution=item.get("cut_execution", {}).get("S"),
        clean=int(item["clean"]["N"]),
        counted_through=float(item["counted_through"]["N"]),
        since=float(item.get("since", {}).get("N", "0")),
        probing=bool(item.get("probing", {}).get("BOOL", False)),
        step=int(item.get("step", {}).get("N", "1")),
        peak=None if peak is None else int(peak),
        evidence=int(item.get("evidence", {}).get("N", "0")),
        signal_at=None if signal_at is None else float(signal_at),
        floor_since=None if floor_since is None else float(floor_since),
    )
