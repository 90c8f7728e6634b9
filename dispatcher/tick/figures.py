"""What a tick's report says as metrics: each figure's name, unit, value and dimension (none: the totals).

Pure: the handler hands them to Powertools (`dispatcher.telemetry.emit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dispatcher.core.events import EndNews
from dispatcher.core.outcomes import member_metrics, metric_totals
from dispatcher.core.topology import GATE, LANE, Topology
from dispatcher.tick.report import StopReason, TenantFigures, TickReport

Unit = Literal["Count", "Seconds", "Percent"]


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
    summed = metric_totals(report.kinds, report.members())
    lane_metrics = metric_totals((LANE,), ())
    found += [Figure(name, value) for name, value in summed.items() if name in lane_metrics]
    if report.laned:
        found += _lanes_and_pools(report)
    if report.gates:
        found += [Figure(name, value) for name, value in summed.items() if name not in lane_metrics]
        found += _gates(report)
    if report.tenants is not None:
        found += _tenants(report.tenants)
    return found + _adaptive(report)


def _adaptive(report: TickReport) -> list[Figure]:
    """Each adaptive pool's limit L, and how many sit at their lowest (the alarm's: a downstream down)."""
    adaptive = {pool: figures.limit for pool, figures in report.pools.items() if figures.limit is not None}
    if not adaptive:
        return []
    lowest = sum(1 for pool, limit in adaptive.items() if limit == report.pools[pool].minimum)
    return [
        Figure("PoolsAtMinimum", lowest),
        *(Figure("PoolLimit", limit, dimension=("Pool", pool)) for pool, limit in adaptive.items()),
    ]


def _lanes_and_pools(report: TickReport) -> list[Figure]:
    """Each lane's figures under a Lane dimension, and each pool's RUNNING, free slots and MAX."""
    found = [
        Figure(name, value, dimension=("Lane", lane))
        for lane, counts in report.lanes.items()
        for name, value in member_metrics(LANE, counts).items()
    ]
    for pool, pool_figures in report.pools.items():
        found += [
            Figure(name, value, dimension=("Pool", pool))
            for name, value in (
                ("Running", pool_figures.running),
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


def _gates(report: TickReport) -> list[Figure]:
    """Each gate's figures under a Gate dimension, and the longest anyone has been inside (the alarm's)."""
    ages = [inside.oldest_inside_seconds for inside in report.inside.values()]
    found = [Figure("OldestInsideAge", max((age for age in ages if age is not None), default=0.0), "Seconds")]
    for gate, counts in report.gates.items():
        inside = report.inside.get(gate)
        named = member_metrics(GATE, counts) | ({} if inside is None else {"Inside": inside.inside})
        found += [Figure(name, value, dimension=("Gate", gate)) for name, value in named.items()]
    return found


def news_figures(news: EndNews) -> list[Figure]:
    """A batch of ends: how many records were ends, wakes, and skipped (a single event: only a wake)."""
    wakes = [Figure("Wakes", len(news.wakes))] if news.wakes else []
    if news.records is None:
        return wakes
    return [Figure("EndEvents", len(news.ended)), Figure("SkippedEventRecords", len(news.skipped)), *wakes]
