"""DynamoDB's sizes of items, in memory: what a read or a write of one costs.

A number is 1 byte per 2 digits, + 1; a list or a map 3 bytes, + 1 a member; an item each
attribute's name and value. A write unit is 1 KB, a read unit 4 KB (strongly consistent),
a `Query` page 1 MB.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

QUERY_PAGE_BYTES = 1024 * 1024
READ_UNIT_BYTES = 4096
WRITE_UNIT_BYTES = 1024


def _value_bytes(kind: str, content: Any) -> int:
    """DynamoDB's size of one value.

    A number is 1 byte per 2 digits, + 1; a list or a map 3 bytes, + 1 a member and the
    members (a map's with their names); null and a boolean 1.
    """
    if kind == "S":
        return len(str(content).encode())
    if kind == "N":
        digits = len(str(content).replace("-", "").replace(".", "").strip("0")) or 1
        return math.ceil(digits / 2) + 1
    if kind == "SS":
        return sum(len(str(member).encode()) for member in content)
    if kind == "L":
        return 3 + sum(1 + _typed_bytes(member) for member in content)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + _typed_bytes(value) for name, value in content.items())
    return 1


def _typed_bytes(value: Mapping[str, Any]) -> int:
    [(kind, content)] = value.items()
    return _value_bytes(kind, content)


def item_bytes(item: Mapping[str, Mapping[str, Any]]) -> int:
    """DynamoDB's size of an item: each attribute's name and value."""
    size = 0
    for name, value in item.items():
        size += len(name.encode()) + _typed_bytes(value)
    return size


def write_units(item: Mapping[str, Mapping[str, Any]]) -> int:
    """Write request units of one item (1 KB each, rounded up)."""
    return max(1, math.ceil(item_bytes(item) / WRITE_UNIT_BYTES))


@dataclass
class Stored:
    """One item of a partition, and its size."""

    item: dict[str, Any]
    size: int = 0

    def __post_init__(self) -> None:
        self.size = item_bytes(self.item)
