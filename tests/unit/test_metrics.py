"""What a tick reports: every metric (name, dimension, value) and every key of the return value, pinned."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from dispatcher import handler
from dispatcher.core.counting import Count
from dispatcher.core.kinds.gate import GATE, Gate
from dispatcher.core.outcomes import Counts, Outcome
from dispatcher.core.topology import DEFAULT, LANE, Lane, Pool, Topology
from dispatcher.telemetry import metrics
from dispatcher.tick.report import MemberFigures, PoolFigures, StopReason, TenantFigures, TickReport

STARTED, REDRIVEN, ALREADY, REFUSED = Outcome.STARTED, Outcome.REDRIVEN, Outcome.ALREADY, Outcome.REFUSED
DEAD, WAITING, FAILED = Outcome.DEAD_LETTERED, Outcome.WAITING, Outcome.DELETE_FAILED
ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"
GATED = "arn:aws:states:us-east-1:123456789012:stateMachine:gated"


def _lane(name: str, pool: str = DEFAULT) -> Lane:
    return Lane(
        name=name, pool=pool, queue_url="q.fifo", dead_letter_queue_url="d.fifo", state_machine_arn=ARN
    )


TOPOLOGY = Topology(
    pools=(Pool(DEFAULT, 7), Pool("glue", 3)),
    members=(
        _lane(DEFAULT),
        _lane("urgent"),
        Gate(
            name="etl",
            pool="glue",
            queue_url="g.fifo",
            dead_letter_queue_url="gd.fifo",
            state_machine_arn=GATED,
        ),
    ),
)


def _report() -> TickReport:
    """A tick of two lanes and a gate in two pools, with held jobs: every count different."""
    report = TickReport(
        running=6,
        free=4,
        stopped=StopReason.CAPACITY,
        oldest_running_seconds=12.5,
        members={
            DEFAULT: MemberFigures(kind=LANE),
            "urgent": MemberFigures(kind=LANE),
            "etl": MemberFigures(kind=GATE, count=Count(2, 40.0)),
        },
        pools={
            DEFAULT: PoolFigures(max_concurrency=7, running=4, free=3),
            "glue": PoolFigures(max_concurrency=3, running=2, free=1),
        },
    )
    report.count_round(DEFAULT, Counts({STARTED: 3, REDRIVEN: 1, ALREADY: 2, DEAD: 1, WAITING: 5, FAILED: 1}))
    report.count_round("urgent", Counts({STARTED: 4, DEAD: 2, WAITING: 1, Outcome.CANCELLED: 8}))
    report.count_round(DEFAULT, Counts({Outcome.EXPIRED: 9}))
    report.count_round("etl", Counts({STARTED: 2, ALREADY: 1, REFUSED: 3, DEAD: 4, WAITING: 6, FAILED: 2}))
    report.tenants = TenantFigures(held=2, groups_at_limit=1, largest_group_share=0.25)
    return report


@pytest.fixture
def emitted(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    """Metrics printed as EMF on standard output (the tests' environment disables them)."""
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    capsys.readouterr()
    yield
    metrics.clear_metrics()


def _figures(printed: str) -> set[tuple[str, str, str, float]]:
    """(metric, dimension, its value, figure) of every EMF document printed."""
    found = set()
    for line in printed.splitlines():
        if '"_aws"' not in line:
            continue
        document: dict[str, Any] = json.loads(line)
        for directive in document["_aws"]["CloudWatchMetrics"]:
            dimensions = [name for names in directive["Dimensions"] for name in names if name != "service"]
            dimension = dimensions[0] if dimensions else ""
            for metric in directive["Metrics"]:
                value = document[metric["Name"]]
                figure = value[0] if isinstance(value, list) else value
                found.add((metric["Name"], dimension, document.get(dimension, ""), float(figure)))
    return found


@pytest.mark.usefixtures("emitted")
def test_a_tick_of_lanes_gates_pools_and_tenants_emits_each_figure_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Totals, then each lane, pool and gate under its own dimension: the names the dashboard reads."""
    handler.emit_report(_report(), TOPOLOGY)
    metrics.flush_metrics()
    assert _figures(capsys.readouterr().out) == {
        ("MaxConcurrency", "", "", 7.0),
        ("Paused", "", "", 0.0),
        ("ThrottledTicks", "", "", 0.0),
        ("OldestRunningAge", "", "", 12.5),
        ("Running", "", "", 6.0),
        ("FreeSlots", "", "", 4.0),
        ("Started", "", "", 7.0),
        ("Redriven", "", "", 1.0),
        ("AlreadyStarted", "", "", 2.0),
        ("DeadLettered", "", "", 7.0),
        ("CancelledJobs", "", "", 8.0),
        ("ExpiredJobs", "", "", 9.0),
        ("Released", "", "", 12.0),
        ("DeleteFailures", "", "", 3.0),
        ("Started", "Lane", DEFAULT, 3.0),
        ("DeadLettered", "Lane", DEFAULT, 1.0),
        ("Released", "Lane", DEFAULT, 5.0),
        ("Started", "Lane", "urgent", 4.0),
        ("DeadLettered", "Lane", "urgent", 2.0),
        ("Released", "Lane", "urgent", 1.0),
        ("Running", "Pool", DEFAULT, 4.0),
        ("RunningSlots", "Pool", DEFAULT, 4.0),
        ("FreeSlots", "Pool", DEFAULT, 3.0),
        ("MaxConcurrency", "Pool", DEFAULT, 7.0),
        ("Running", "Pool", "glue", 2.0),
        ("RunningSlots", "Pool", "glue", 2.0),
        ("FreeSlots", "Pool", "glue", 1.0),
        ("MaxConcurrency", "Pool", "glue", 3.0),
        ("Admitted", "", "", 2.0),
        ("TokensRefused", "", "", 3.0),
        ("OldestInsideAge", "", "", 40.0),
        ("Admitted", "Gate", "etl", 2.0),
        ("TokensRefused", "Gate", "etl", 3.0),
        ("DeadLettered", "Gate", "etl", 4.0),
        ("Inside", "Gate", "etl", 2.0),
        ("HeldJobs", "", "", 2.0),
        ("GroupsAtLimit", "", "", 1.0),
        ("LargestGroupShare", "", "", 25.0),
    }


@pytest.mark.usefixtures("emitted")
def test_a_tick_that_found_the_lease_held_emits_only_a_busy_tick(capsys: pytest.CaptureFixture[str]) -> None:
    """Another tick reports for both: a busy one adds BusyTicks and nothing else."""
    handler.emit_report(
        TickReport(stopped=StopReason.BUSY, members={"etl": MemberFigures(kind=GATE)}), TOPOLOGY
    )
    metrics.flush_metrics()
    assert _figures(capsys.readouterr().out) == {("BusyTicks", "", "", 1.0)}


def test_the_return_value_of_lanes_gates_pools_and_tenants_holds_every_key_in_its_order() -> None:
    """Totals first (a gate's own after them), then each lane, pool, the tenants and each gate."""
    document = _report().as_dict()
    assert json.dumps(document) == json.dumps(
        {
            "running": 6,
            "free": 4,
            "started": 7,
            "redriven": 1,
            "already_started": 2,
            "dead_lettered": 7,
            "cancelled": 8,
            "expired": 9,
            "released": 12,
            "delete_failures": 3,
            "stopped": "capacity",
            "ticks": 1,
            "oldest_running_seconds": 12.5,
            "admitted": 2,
            "already_inside": 1,
            "refused": 3,
            "lanes": {
                DEFAULT: {
                    "started": 3,
                    "redriven": 1,
                    "already_started": 2,
                    "dead_lettered": 1,
                    "cancelled": 0,
                    "expired": 9,
                    "released": 5,
                    "delete_failures": 1,
                },
                "urgent": {
                    "started": 4,
                    "redriven": 0,
                    "already_started": 0,
                    "dead_lettered": 2,
                    "cancelled": 8,
                    "expired": 0,
                    "released": 1,
                    "delete_failures": 0,
                },
            },
            "pools": {
                DEFAULT: {"max_concurrency": 7, "running": 4, "free": 3},
                "glue": {"max_concurrency": 3, "running": 2, "free": 1},
            },
            "tenants": {"held": 2, "groups_at_limit": 1, "largest_group_share": 0.25},
            "gates": {
                "etl": {
                    "admitted": 2,
                    "already_inside": 1,
                    "refused": 3,
                    "dead_lettered": 4,
                    "released": 6,
                    "delete_failures": 2,
                    "inside": 2,
                    "oldest_inside_seconds": 40.0,
                }
            },
        }
    )


def test_the_return_value_of_one_lane_keeps_the_contracts_keys_and_no_member_lists() -> None:
    """Without lanes or gates: the contract's totals only, no lanes, pools or gate keys."""
    report = TickReport(
        running=2, free=1, stopped=StopReason.DRAINED, members={DEFAULT: MemberFigures(kind=LANE)}
    )
    report.count_round(DEFAULT, Counts({STARTED: 1}))
    assert report.as_dict() == {
        "running": 2,
        "free": 1,
        "started": 1,
        "redriven": 0,
        "already_started": 0,
        "dead_lettered": 0,
        "cancelled": 0,
        "expired": 0,
        "released": 0,
        "delete_failures": 0,
        "stopped": "drained",
        "ticks": 1,
        "oldest_running_seconds": None,
    }
