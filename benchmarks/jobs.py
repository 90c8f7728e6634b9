"""Section 13: what following, cancelling and bounding jobs cost — section 8's run with and without them.

The same us-east-1 run as section 8 (the template's batched ends), three times side by side:
once as it is, once with 1 % of the jobs cancelled by their producer as they are sent and 1 %
carrying a ``StartBy`` that has passed when they are received, and once as it is after
10,000 names were cancelled up front (jobs never sent: every tick's read of the window
brings their cancellations). The targets: calls per start and the bill within 2 % of the run
without them; with 10,000 cancelled, at most one more `Query` page a tick.
"""

from __future__ import annotations

from typing import Any

from benchmarks import billing

TOLERANCE = 0.02
CANCELLED_UP_FRONT = 10_000
MORE_PAGES = 1
"""With `CANCELLED_UP_FRONT` names cancelled, a tick reads at most this many more `Query` pages."""


def pages_per_tick(result: dict[str, Any]) -> float:
    """`Query` calls (a page each) per invocation: the window each tick reads."""
    return result["calls"].get("Query", 0) / max(1, result["invocations"])


def calls_per_start(result: dict[str, Any]) -> float:
    """Every AWS request of the run per execution started."""
    return sum(result["calls"].values()) / max(1, result["starts"])


def lines(plain: dict[str, Any], followed: dict[str, Any], many: dict[str, Any] | None = None) -> list[str]:
    """The two runs side by side: starts, calls per start, the bill, what the followed run dropped.

    ``many``: the run after `CANCELLED_UP_FRONT` names were cancelled, a line of its own.
    """
    rows = [
        ("executions started", f"{plain['starts']:,}", f"{followed['starts']:,}"),
        ("calls per start", f"{calls_per_start(plain):.3f}", f"{calls_per_start(followed):.3f}"),
        ("bill per million executions", f"${billing.total(plain):.3f}", f"${billing.total(followed):.3f}"),
        ("jobs cancelled", "0", f"{followed['cancelled']:,}"),
        ("jobs expired", "0", f"{followed['expired']:,}"),
        (
            "read units per start",
            _units(plain, "Read"),
            _units(followed, "Read"),
        ),
        (
            "write units per start",
            _units(plain, "Write"),
            _units(followed, "Write"),
        ),
    ]
    rows.append(("Query pages per tick", f"{pages_per_tick(plain):.3f}", f"{pages_per_tick(followed):.3f}"))
    out = [f"   {'':<32} {'without':>12} {'1 % cancelled, 1 % expired':>28}"]
    out += [f"   {name:<32} {left:>12} {right:>28}" for name, left, right in rows]
    if many is not None:
        out.append(
            f"   {CANCELLED_UP_FRONT:,} names cancelled up front: {pages_per_tick(many):.3f} Query pages"
            " a tick"
            f" ({pages_per_tick(plain):.3f} without), {_units(many, 'Read')} read units a start,"
            f" calls per start {calls_per_start(many):.3f}, bill ${billing.total(many):.3f}"
        )
    return out


def _units(result: dict[str, Any], kind: str) -> str:
    return f"{result['units'].get(f'{kind}RequestUnits', 0) / max(1, result['starts']):.3f}"


def targets(
    plain: dict[str, Any], followed: dict[str, Any], many: dict[str, Any] | None = None
) -> list[tuple[str, bool, str]]:
    """Calls per start and the bill within 2 % of the run without; ``many``: at most one more page a tick."""
    found = []
    for name, measure, fmt in (
        ("calls per start within 2 % with 1 % cancelled and 1 % expired", calls_per_start, "{:.3f}"),
        ("the bill within 2 % with 1 % cancelled and 1 % expired", billing.total, "${:.3f}"),
    ):
        base, value = measure(plain), measure(followed)
        change = value / base - 1 if base else 0.0
        found.append(
            (name, abs(change) <= TOLERANCE, f"{fmt.format(value)} against {fmt.format(base)}: {change:+.1%}")
        )
    if many is not None:
        more = pages_per_tick(many) - pages_per_tick(plain)
        found.append(
            (
                f"at most {MORE_PAGES} more Query page a tick with {CANCELLED_UP_FRONT:,} cancelled by name",
                more <= MORE_PAGES,
                f"{pages_per_tick(many):.3f} against {pages_per_tick(plain):.3f}: {more:+.3f}",
            )
        )
    return found
