"""The item of the members' queues (`dispatcher.core.member_queues`), one in the ledger's partition.

Under sort key ``~members``: after every record, so the window each tick reads brings it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MEMBERS_KIND, MEMBERS_KEY = "members", "~members"


def members_item(partition_key: str, queues: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """The members' queues, as the one item of the ledger's partition that keeps them (no TTL)."""
    return {
        "pk": {"S": partition_key},
        "sk": {"S": MEMBERS_KEY},
        "kind": {"S": MEMBERS_KIND},
        "queues": {"S": json.dumps(queues, sort_keys=True)},
    }


def read_members(item: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The members' queues an item of `members_item` holds."""
    value: Any = json.loads(item["queues"]["S"])
    return value if isinstance(value, dict) else {}
