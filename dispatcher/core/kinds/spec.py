"""What a kind of member declares: how its members are configured, steered, counted and reported.

A kind is one `Kind`, registered once in `dispatcher.core.kinds.KINDS`: code that works on
members asks their kind (`kind_of`) rather than naming lanes or gates. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dispatcher.core.counting import Count
from dispatcher.core.lanes_document import MemberDocument
from dispatcher.core.outcomes import Outcome
from dispatcher.core.overrides import Override
from dispatcher.core.topology import Member

Unit = Literal["Count", "Seconds", "Percent"]
"""A metric's unit, as CloudWatch names it."""


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


def _nothing(_count: Count) -> dict[str, Any]:
    return {}


def _no_totals(_counts: Sequence[Count]) -> dict[str, tuple[float, Unit]]:
    return {}


def _no_check(_members: Sequence[Member]) -> None:
    return None


@dataclass(frozen=True)
class Kind:
    """One kind of member: its name, its members' class, its outcomes' rows, its settings and its figures."""

    name: str
    """`Member.kind`: ``--lane``, ``lane default``."""
    plural: str
    """Its members' key in ``LANES``, in the control parameter, in the return value and in `status --json`."""
    member: type[Member]
    document: type[MemberDocument]
    """Its members' entry in ``LANES`` (its fields are the member's)."""
    labels: Mapping[Outcome, Label]
    """Outcome → how it is reported. The outcomes a kind has no row for never happen in it."""
    dimension: str
    """Its members' metrics' dimension (``Lane``, ``Gate``)."""
    settings: tuple[str, ...]
    """The keys an operator sets on one of its members, beside MAX and the pause (`set`, `unset`)."""
    override: type[Override]
    """A member's entry in the control parameter."""
    entry: Callable[[Count], dict[str, Any]] = _nothing
    """What a member's entry in the return value shows of its count, beside its outcomes."""
    metrics: Callable[[Count], dict[str, float]] = _nothing
    """What a member's metrics show of its count, beside its outcomes' (each a Count)."""
    totals: Callable[[Sequence[Count]], dict[str, tuple[float, Unit]]] = _no_totals
    """The metrics (name → value and unit) over its members' counts, when it has members."""
    check: Callable[[Sequence[Member]], None] = _no_check
    """Raises a `ConfigurationError` when ``LANES``' members (lane ``default`` first) break its rules."""
    primary: bool = False
    """The kind of the environment's member (lane ``default``): its keys lead the return value's totals,
    and its members' entries are listed only when there is more than member ``default``."""
