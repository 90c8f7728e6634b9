"""Message bodies the tests of several layers need."""

from __future__ import annotations

import json


def json_of_size(size: int) -> str:
    """A JSON object of exactly ``size`` bytes in UTF-8 (ASCII only)."""
    return json.dumps({"x": "a" * (size - len(json.dumps({"x": ""})))})
