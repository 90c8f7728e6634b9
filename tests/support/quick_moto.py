"""Two of moto's costs that the suite paid on every call, cut without changing an answer (tests only).

Measured with py-spy on the fast fault profile's scenarios (CONTRIBUTING, "The suite's time"):

- **A `Query` on a table's own key sorted the whole table.** moto's ``Table.query`` took
  ``all_items()`` (every item of every partition, sorted by their keys, each comparison
  converting both values), kept the items of the one partition asked for, then sorted
  those by their sort key again. The state table holds the ledger, the rosters, the
  lease and the ends: 5 % of a scenario's CPU. Here, while a thread runs such a query,
  ``all_items()`` of that table gives that partition's items alone. The query keeps them
  and sorts them as before: the same items in the same order, pages and all. A query of
  an index goes moto's way.
- **A receipt handle was 185 calls of ``random.choice``** (moto's ``generate_receipt_handle``),
  for each message a receive hands out: 3 % of a scenario's CPU. Here one call of
  ``random.choices`` draws the same 185 lowercase letters from moto's random.

`tests/integration/test_quick_moto.py` checks the answers against moto's own.
"""

from __future__ import annotations

import inspect
import string
import threading
from typing import Any

_NARROWED = threading.local()
"""``table``, ``hash_key``: the query this thread runs on a table's own key (None: none)."""
RECEIPT_HANDLE_LENGTH = 185
"""moto's (`moto.sqs.utils.generate_receipt_handle`)."""


def quick_queries() -> None:
    """A `Query` without an index reads its partition, not the whole table sorted (once a process)."""
    from moto.dynamodb.models.table import Table  # noqa: PLC0415

    if getattr(Table.query, "quick", False):
        return
    query, all_items = Table.query, Table.all_items
    signature = inspect.signature(query)

    def narrowed(self: Any) -> list[Any]:
        if getattr(_NARROWED, "table", None) is not self:
            return all_items(self)
        found = self.items.get(_NARROWED.hash_key)
        if found is None:
            return []
        return list(found.values()) if self.range_key_attr else [found]

    def quick(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        hash_key = bound.arguments.get("hash_key")
        if bound.arguments.get("index_name") or hash_key is None:
            return query(self, *args, **kwargs)
        _NARROWED.table, _NARROWED.hash_key = self, hash_key
        try:
            return query(self, *args, **kwargs)
        finally:
            _NARROWED.table = _NARROWED.hash_key = None

    quick.quick = True  # type: ignore[attr-defined]
    quick.moto = query  # type: ignore[attr-defined]
    Table.query = quick  # type: ignore[method-assign]
    Table.all_items = narrowed  # type: ignore[method-assign]


def quick_receipt_handles() -> None:
    """A receipt handle drawn in one call: 185 lowercase letters from moto's random, as moto's are."""
    import moto.sqs.models  # noqa: PLC0415
    from moto.moto_api._internal import mock_random  # noqa: PLC0415

    def generate_receipt_handle() -> str:
        return "".join(mock_random.choices(string.ascii_lowercase, k=RECEIPT_HANDLE_LENGTH))

    moto.sqs.models.generate_receipt_handle = generate_receipt_handle
