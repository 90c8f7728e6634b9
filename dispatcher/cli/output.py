"""How the CLI shows things: aligned tables, short cells, times and ages."""

from __future__ import annotations

import time


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
        for cells in (headers, *rows)
    )


def short(text: str | None, width: int = 60) -> str:
    """One line of at most ``width`` characters ("-" for nothing)."""
    text = " ".join((text or "-").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def when(moment: float) -> str:
    """An epoch time in UTC, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(moment))


def age(seconds: float | None) -> str:
    """A duration as 45s, 3m07s or 2h05m ("-" for none)."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
