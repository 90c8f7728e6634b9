"""How the state table's items are keyed and their numbers written: what every kind of item shares."""

from __future__ import annotations

from dispatcher.core.counting import stored_time

__all__ = ["INSIDE_KIND", "inside_key", "number", "sort_key", "stored_time"]

INSIDE_KIND = "inside"
"""A gate's item of one execution inside it."""


def sort_key(written_at: float, name: str) -> str:
    """Sort key that orders records by time as strings (fixed width until year 2286)."""
    return f"{written_at:017.6f}#{name}"


def number(value: float) -> dict[str, str]:
    """A number attribute, to the microsecond."""
    return {"N": f"{value:.6f}"}


def inside_key(gate: str, name: str) -> str:
    """What tells an admission record apart from any other record: its gate and its execution."""
    return f"{INSIDE_KIND}#{gate}#{name}"
