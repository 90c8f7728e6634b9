"""The kinds of member, registered once: each declares its outcomes' rows, settings and figures.

`KINDS` is every kind, in the order the return value, the metrics and `status` list them;
`kind_of` finds one by name (`Member.kind`). The return value, the metrics, `dispatcher
tick`, `dispatcher local` and the fault harness's tally all read the kinds' rows: a new
outcome is one row per kind, a new kind one `Kind`. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dispatcher.core.kinds.gate import GATE_KIND
from dispatcher.core.kinds.lane import LANE_KIND
from dispatcher.core.kinds.spec import Kind, Label
from dispatcher.core.outcomes import Counts, Outcome

__all__ = ["KINDS", "LABELS", "PRIMARY", "Kind", "Label", "kind_of"]

KINDS: tuple[Kind, ...] = (LANE_KIND, GATE_KIND)
"""Every kind of member: the primary one (lane) first."""

PRIMARY = LANE_KIND
"""The kind of the environment's member (lane ``default``): `Kind.primary`."""

LABELS: Mapping[str, Mapping[Outcome, Label]] = {kind.name: kind.labels for kind in KINDS}
"""Kind → outcome → how it is reported."""


def kind_of(name: str) -> Kind:
    """The kind called ``name`` (`KeyError` when there is none)."""
    for kind in KINDS:
        if kind.name == name:
            return kind
    raise KeyError(name)


def keyed(kind: str, counts: Counts) -> dict[str, int]:
    """A member's counts as its return value holds them: every key of its kind, in the table's order."""
    return {label.key: counts[outcome] for outcome, label in LABELS[kind].items()}


def total_keys(kinds: Iterable[str]) -> list[str]:
    """The totals' keys when members of ``kinds`` are configured: each key once, in the kinds' order."""
    return list(dict.fromkeys(label.key for kind in kinds for label in LABELS[kind].values()))


def totals(kinds: Sequence[str], members: Iterable[tuple[str, Counts]]) -> dict[str, int]:
    """The totals of ``members`` (kind, counts), by key: a key two kinds share is their sum."""
    summed = dict.fromkeys(total_keys(kinds), 0)
    for kind, counts in members:
        for outcome, label in LABELS[kind].items():
            summed[label.key] = summed.get(label.key, 0) + counts[outcome]
    return summed


def metric_totals(kinds: Sequence[str], members: Iterable[tuple[str, Counts]]) -> dict[str, int]:
    """The totals' metrics of ``members`` (kind, counts), by metric name, for the kinds configured."""
    summed = {label.total: 0 for kind in kinds for label in LABELS[kind].values() if label.total is not None}
    for kind, counts in members:
        for outcome, label in LABELS[kind].items():
            if label.total is not None:
                summed[label.total] = summed.get(label.total, 0) + counts[outcome]
    return summed


def member_metrics(kind: str, counts: Counts) -> dict[str, int]:
    """A member's own metrics (under its dimension), by name, in the table's order."""
    return {
        label.member: counts[outcome] for outcome, label in LABELS[kind].items() if label.member is not None
    }


def said(report: Mapping[str, Any], kinds: Sequence[str], shown: frozenset[Outcome] | None = None) -> str:
    """The totals of a return value as one line's parts: ``started 3 (1 redriven), dead-lettered 0``.

    Each key once, in the table's order; an outcome reported ``within`` another is said in
    brackets after it, when it is not 0. ``shown``: only these outcomes (None: all).
    """
    parts: list[str] = []
    seen: set[str] = set()
    for outcome in Outcome:
        for kind in kinds:
            label = LABELS[kind].get(outcome)
            if label is None or label.key in seen or not _says(report, label, outcome, shown):
                continue
            seen.add(label.key)
            inner = _within(report, kind, outcome, shown)
            parts.append(
                f"{label.words} {report.get(label.key, 0)}" + (f" ({', '.join(inner)})" if inner else "")
            )
    return ", ".join(parts)


def _says(
    report: Mapping[str, Any], label: Label, outcome: Outcome, shown: frozenset[Outcome] | None
) -> bool:
    """Whether a one-line report says this outcome on its own: not within another, shown, not quiet at 0."""
    if label.within is not None or (shown is not None and outcome not in shown):
        return False
    return not label.quiet or bool(report.get(label.key))


def _within(
    report: Mapping[str, Any], kind: str, outcome: Outcome, shown: frozenset[Outcome] | None
) -> list[str]:
    """The outcomes said in brackets after ``outcome``'s figure (those not 0)."""
    return [
        f"{report.get(part.key, 0)} {part.words}"
        for part in LABELS[kind].values()
        if part.within is outcome and (shown is None or _outcome_of(kind, part) in shown)
        if report.get(part.key)
    ]


def said_keys(kinds: Sequence[str], shown: frozenset[Outcome]) -> set[str]:
    """The return value's keys of these outcomes, for these kinds."""
    return {label.key for kind in kinds for outcome, label in LABELS[kind].items() if outcome in shown}


def _outcome_of(kind: str, label: Label) -> Outcome:
    return next(outcome for outcome, each in LABELS[kind].items() if each is label)
