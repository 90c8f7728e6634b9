"""What a tick's report says as metrics: each figure's name, unit, value and dimension (none: the totals).

Pure: the handler hands them to Powertools (`dispatcher.telemetry.emit`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatcher.core.events import EndNews
from dispatcher.core.kinds import KINDS, PRIMARY, Kind, member_metrics, metric_totals
from dispatcher.core.kinds.spec import Unit
from dispatcher.core.topology import Topology
from dispatcher.tick.report import StopReason, TenantFigures, TickReport

AT_MINIMUM_SECONDS = 900.0
"""`PoolsAtMinimum` counts a pool once its L has sat at its lowest this long (the alarm's 15 minutes)."""


@dataclass(frozen=True)
class Figure:
    """One metric: totals have no dimension; a lane's, pool's or gate's has ``("Lane", name)`` and so on."""

    name: str
    value: float
    unit: Unit = "Count"
    dimension: tuple[str, str] | None = None


def figures(report: TickReport, topology: Topology) -> list[Figure]:
    """The tick's figures: totals, and each lane's, pool's and gate's under its dimension.

    ``topology``: the limits the tick began with (pool ``default``'s MAX and pause are figures).
    A tick that found the lease held reports one figure: another tick reports for both, and
    two figures of one minute would halve the dashboard's RUNNING and MAX.
    """
    if report.stopped is StopReason.BUSY:
        return [Figure("BusyTicks", 1)]
    default = topology.default_pool
    found = [
        Figure("MaxConcurrency", default.max_concurrency),
        Figure("Paused", int(default.halted)),
        Figure("ThrottledTicks", int(report.stopped is StopReason.THROTTLED)),
    ]
    if report.oldest_running_seconds is not None:
        found.append(Figure("OldestRunningAge", report.oldest_running_seconds, "Seconds"))
    found += [Figure("Running", report.running), Figure("FreeSlots", report.free)]
    found += [
        Figure("ReservedSlots", pool.reserved, dimension=("Pool", name))
        for name, pool in report.pools.items()
        if pool.reserved
    ]
    found += _outcomes(report)
    if report.tenants is not None:
        found += _tenants(report.tenants)
    return found + _adaptive(report)


def _outcomes(report: TickReport) -> list[Figure]:
    """The outcomes' totals, and each member's figures: the primary kind's first, with the pools'."""
    summed = metric_totals(report.kinds, report.counted())
    primary_metrics = metric_totals((PRIMARY.name,), ())
    found = [Figure(name, value) for name, value in summed.items() if name in primary_metrics]
    if report.laned:
        found += _members(report, PRIMARY) + _pools(report)
    return found + _other_kinds(
        report, {name: value for name, value in summed.items() if name not in primary_metrics}
    )


def _other_kinds(report: TickReport, totals: dict[str, int]) -> list[Figure]:
    """The other kinds' totals once (when any has members), then each kind's own figures and members'."""
    others = [kind for kind in KINDS if not kind.primary and report.of_kind(kind)]
    found = [Figure(name, value) for name, value in totals.items()] if others else []
    for kind in others:
        found += _kind_totals(report, kind) + _members(report, kind)
    return found


def _adaptive(report: TickReport) -> list[Figure]:
    """Each adaptive pool's limit L, and how many have sat at their lowest for 15 minutes (a downstream down).

    The same pool all along: a pool that left its lowest and came back starts its 15 minutes again.
    """
    adaptive = {pool: figures.limit for pool, figures in report.pools.items() if figures.limit is not None}
    if not adaptive:
        return []
    lowest = sum(1 for pool in adaptive if (report.pools[pool].floor_seconds or 0.0) >= AT_MINIMUM_SECONDS)
    return [
        Figure("PoolsAtMinimum", lowest),
        *(Figure("PoolLimit", limit, dimension=("Pool", pool)) for pool, limit in adaptive.items()),
    ]


def _members(report: TickReport, kind: Kind) -> list[Figure]:
    """Each member of ``kind``'s figures under its dimension: its outcomes', and its kind's of its count."""
    found = []
    for name, member in report.of_kind(kind).items():
        named: dict[str, float] = {**member_metrics(kind.name, member.counts)}
        named |= {} if member.count is None else kind.metrics(member.count)
        found += [Figure(metric, value, dimension=(kind.dimension, name)) for metric, value in named.items()]
    return found


def _kind_totals(report: TickReport, kind: Kind) -> list[Figure]:
    """What ``kind`` totals of its members' counts (a gate's: the longest anyone has been inside)."""
    counts = [member.count for member in report.of_kind(kind).values() if member.count is not None]
    return [Figure(name, value, unit) for name, (value, unit) in kind.totals(counts).items()]


def _pools(report: TickReport) -> list[Figure]:
    """Each pool's RUNNING, free slots and MAX; its RUNNING again as ``RunningSlots`` (a job's size each)."""
    found: list[Figure] = []
    for pool, pool_figures in report.pools.items():
        found += [
            Figure(name, value, dimension=("Pool", pool))
            for name, value in (
                ("Running", pool_figures.running),
                ("RunningSlots", pool_figures.running),
                ("FreeSlots", pool_figures.free),
                ("MaxConcurrency", pool_figures.max_concurrency),
            )
        ]
    return found


def _tenants(tenants: TenantFigures) -> list[Figure]:
    """The tenant groups' figures: jobs held, groups at their limit, the largest group's share."""
    found = [Figure("HeldJobs", tenants.held), Figure("GroupsAtLimit", tenants.groups_at_limit)]
    if tenants.largest_group_share is not None:
        found.append(Figure("LargestGroupShare", 100 * tenants.largest_group_share, "Percent"))
    return found


def news_figures(news: EndNews) -> list[Figure]:
    """A batch of ends: how many records were ends, wakes, and skipped (a single event: only a wake)."""
    wakes = [Figure("Wakes", len(news.wakes))] if news.wakes else []
    if news.records is None:
        return wakes
    return [Figure("EndEvents", len(news.ended)), Figure("SkippedEventRecords", len(news.skipped)), *wakes]
