"""How the state table's items are keyed and their numbers written: what every kind of item shares."""

from __future__ import annotations

from dispatcher.core.counting import stored_time

__all__ = ["INSIDE_KIND", "number", "sort_key", "stored_time"]

INSIDE_KIND = "inside"
"""A member's roster item of one execution holding its place (a gate's admission, a tenant lane's start)."""


def sort_key(written_at: float, name: str) -> str:
    """Sort key that orders records by time as strings (fixed width until year 2286)."""
    return f"{written_at:017.6f}#{name}"


def number(value: float) -> dict[str, str]:
    """A number attribute, to the microsecond."""
    return {"N": f"{value:.6f}"}
