"""The time by an AWS server's clock: a response's ``Date`` header (whole seconds, rounded up)."""

from __future__ import annotations

from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any


def server_time(response: Mapping[str, Any]) -> float | None:
    """When the server answered, by its clock: the ``Date`` header's second plus one (None: no header).

    The header keeps whole seconds, so the answer came within the second after the one it
    names: the end of that second is the earliest time sure to be no sooner than the answer.
    """
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    date = headers.get("date")
    if not date:
        return None
    try:
        return parsedate_to_datetime(date).timestamp() + 1.0
    except (TypeError, ValueError):
        return None
