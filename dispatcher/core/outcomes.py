"""What becomes of a received message, and the one table of how each outcome is reported.

A round decides each message's outcome (`Outcome`); a tick counts them (`Counts`, a
counter of outcomes, per member). How an outcome is reported depends on the kind of
member it happened in — a lane *starts* an execution, a gate *admits* one — and the table
`LABELS` says, for each kind and outcome, its key in the handler's return value, its
metric (in the totals, and under the member's dimension) and its words in a one-line
report. The return value, the metrics, `dispatcher tick`, `dispatcher local` and the fault
harness's tally all read this table: a new outcome is one row per kind. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dispatcher.core.topology import GATE, LANE


class Outcome(StrEnum):
    """What became of one received message (or, for ``DELETE_FAILED``, of its delete)."""

    STARTED = "started"
    """Its call took: an execution started (or redriven), or admitted into a gate. It took a slot."""
    REDRIVEN = "redriven"
    """Of ``STARTED``: a closed execution redriven (it runs again)."""
    ALREADY = "already"
    """Its call was made before (a redelivery): the execution exists, or is inside. Deleted."""
    REFUSED = "refused"
    """A gate's request whose task token Step Functions refused: deleted, holding no slot."""
    DEAD_LETTERED = "dead_lettered"
    """It can never start: sent to the member's dead-letter queue with the reason, then deleted."""
    CANCELLED = "cancelled"
    """A lane's job its producer cancelled before it started: deleted, never started."""
    EXPIRED = "expired"
    """A lane's job received after its deadline: dead-lettered with an ``expired:`` reason, never started."""
    WAITING = "waiting"
    """It waits for a later round (no slot, its group's order, a rate, a throttle): shown again."""
    DELETE_FAILED = "delete_failed"
    """Done, but its delete failed: it comes back and is found done again."""

    @property
    def done(self) -> bool:
        """Whether the message leaves its queue (deleted; a dead letter once it is in the DLQ)."""
        return self in DONE


DONE = frozenset(
    {
        Outcome.STARTED,
        Outcome.ALREADY,
        Outcome.REFUSED,
        Outcome.DEAD_LETTERED,
        Outcome.CANCELLED,
        Outcome.EXPIRED,
    }
)
"""Outcomes whose message is deleted from its queue (``REDRIVEN`` is counted in ``STARTED``)."""

Counts = Counter[Outcome]
"""How many messages of some rounds (a member's, or every member's) had each outcome."""


@dataclass(frozen=True)
class Label:
    """How one outcome of one kind of member is reported."""

    key: str
    """Its key in the return value: the member's counts, and the totals (summed over kinds by key)."""
    words: str
    """How a one-line report says it (``already started 2``)."""
    total: str | None = None
    """Its metric in the totals (summed over the kinds whose label names it); None: not a metric."""
    member: str | None = None
    """Its metric under the member's dimension (``Lane``, ``Gate``); None: not one."""
    within: Outcome | None = None
    """A one-line report says it in brackets after this outcome's words, and only when it is not 0."""
    quiet: bool = False
    """A one-line report says it only when it is not 0 (what most lanes never see)."""


LABELS: Mapping[str, Mapping[Outcome, Label]] = {
    LANE: {
        Outcome.STARTED: Label("started", "started", "Started", "Started"),
        Outcome.REDRIVEN: Label("redriven", "redriven", "Redriven", within=Outcome.STARTED),
        Outcome.ALREADY: Label("already_started", "already started", "AlreadyStarted"),
        Outcome.DEAD_LETTERED: Label("dead_lettered", "dead-lettered", "DeadLettered", "DeadLettered"),
        Outcome.CANCELLED: Label("cancelled", "cancelled", "CancelledJobs", quiet=True),
        Outcome.EXPIRED: Label("expired", "expired", "ExpiredJobs", quiet=True),
        Outcome.WAITING: Label("released", "released", "Released", "Released"),
        Outcome.DELETE_FAILED: Label("delete_failures", "delete failures", "DeleteFailures"),
    },
    GATE: {
        Outcome.STARTED: Label("admitted", "admitted", "Admitted", "Admitted"),
        Outcome.ALREADY: Label("already_inside", "already inside", within=Outcome.STARTED),
        Outcome.REFUSED: Label(
            "refused", "refused", "TokensRefused", "TokensRefused", within=Outcome.STARTED
        ),
        Outcome.DEAD_LETTERED: Label("dead_lettered", "dead-lettered", "DeadLettered", "DeadLettered"),
        Outcome.WAITING: Label("released", "released", "Released"),
        Outcome.DELETE_FAILED: Label("delete_failures", "delete failures", "DeleteFailures"),
    },
}
"""Kind → outcome → how it is reported. The outcomes a kind has no row for never happen in it."""


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
            if label is None or label.within is not None or label.key in seen:
                continue
            if shown is not None and outcome not in shown:
                continue
            if label.quiet and not report.get(label.key):
                continue
            seen.add(label.key)
            inner = _within(report, kind, outcome, shown)
            parts.append(
                f"{label.words} {report.get(label.key, 0)}" + (f" ({', '.join(inner)})" if inner else "")
            )
    return ", ".join(parts)


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
