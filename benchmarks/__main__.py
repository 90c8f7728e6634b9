"""`make bench`: the dispatcher against its baselines on the embedded emulator, with figures and a plot.

    make bench                               # everything (about an hour here)
    make bench BENCH_ARGS="--quick"          # shorter runs, no 10,000 backlog
    make bench BENCH_ARGS="--skip-full-scale" # sections 1-7: the embedded emulator
    make bench BENCH_ARGS="--only-full-scale" # sections 8 and 9: AWS's quotas, in the in-memory AWS
    make bench BENCH_ARGS="--only-lanes"      # section 9 alone: lanes and pools at AWS's quotas

Each section runs in its own process (its own emulator and environment); the two
refill modes run side by side, as they only wait. Every figure is printed next to
the baselines measured in the same run, and each target of issue 7 is checked.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import footprint, full_scale, lanes, quota, refill, throughput
from benchmarks.plot import draw, draw_full_scale
from tests.support.sim.function import EventSourceMapping
from tests.support.world import Lag

ROOT = Path(__file__).parents[1]
PLOT = ROOT / "benchmarks" / "refill-on-completion.png"
FULL_SCALE_PLOT = ROOT / "benchmarks" / "full-scale.png"
LATENCY = 0.02
LISTING = {"max": 5000, "levels": [0, 999, 1000, 1001, 2500, 5000, 7500]}
OPERATIONS = [
    "GetParameter",
    "PutItem",
    "DeleteItem",
    "UpdateItem",
    "DescribeStateMachine",
    "ListExecutions",
    "Query",
    "ReceiveMessage",
    "BatchWriteItem",
    "StartExecution",
    "DeleteMessageBatch",
    "DeleteMessage",
]


def in_process(function: Callable[..., Any], *arguments: Any) -> Any:
    """Run one section in a fresh process (moto and the handler keep global state)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, arguments)


def side_by_side(function: Callable[..., Any], argument_lists: list[tuple[Any, ...]]) -> list[Any]:
    """Run a section's variants at once, each in its own process."""
    with multiprocessing.get_context("spawn").Pool(len(argument_lists)) as pool:
        return pool.starmap(function, argument_lists)


class Report:
    """Collects lines and target verdicts."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.targets: list[tuple[str, bool, str]] = []

    def say(self, line: str = "") -> None:
        """Print a line of the report."""
        print(line, flush=True)
        self.lines.append(line)

    def target(self, name: str, met: bool, measured: str) -> str:
        """Note a target's verdict; the line that states it."""
        self.targets.append((name, met, measured))
        return f"target {name}: {'met' if met else 'NOT met'} ({measured})"


def report_throughput(result: dict[str, Any], report: Report) -> None:
    """Sections 1-3: calls per start, starts per second, ListExecutions per tick."""
    ticks = result["ticks"]
    by = {(tick["system"], tick["backlog"]): tick for tick in ticks}
    report.say(
        "1. AWS calls per started execution, backlog 1,000 at MAX 1,000"
        f" (by operation; {LATENCY * 1000:.0f} ms per call)"
    )
    report.say(f"   {'operation':<22}{'dispatcher':>12}{'naive':>10}{'list-only':>12}")
    systems = [by.get((system, 1000)) for system in ("dispatcher", "naive", "list-only")]
    for operation in OPERATIONS:
        cells = [
            (tick["calls"].get(operation, 0) / max(1, tick["started"])) if tick else 0.0 for tick in systems
        ]
        if any(cells):
            report.say(
                f"   {operation:<22}"
                + "".join(f"{cell:>{w}.3f}" for cell, w in zip(cells, (12, 10, 12), strict=False))
            )
    totals = [tick["calls_per_start"] if tick else math.nan for tick in systems]
    report.say(
        f"   {'total':<22}"
        + "".join(f"{cell:>{w}.3f}" for cell, w in zip(totals, (12, 10, 12), strict=False))
    )
    report.say(
        "   " + report.target("≤ 1.25 calls per start (1,000 backlog)", totals[0] <= 1.25, f"{totals[0]:.3f}")
    )
    report.say()
    report.say(
        f"2. Starts per second in one tick at MAX = backlog, {LATENCY * 1000:.0f} ms per call,"
        f" {result['groups']} message groups"
    )
    report.say(
        f"   {'backlog':>8}{'dispatcher':>12}{'naive':>10}{'list-only':>12}{'vs naive':>10}"
        "   dispatcher's tick"
    )
    ratios: dict[int, float] = {}
    for backlog in sorted({tick["backlog"] for tick in ticks}):
        ours, naive, listed = by[("dispatcher", backlog)], by[("naive", backlog)], by[("list-only", backlog)]
        ratio = ratios[backlog] = ours["rate"] / naive["rate"]
        note = f"{ours['started']:,} started in {ours['seconds']:.1f} s"
        if ours["left"]:
            note += f", {ours['left']:,} left for the next tick (45 s admission window)"
        report.say(
            f"   {backlog:>8,}{ours['rate']:>12.1f}{naive['rate']:>10.1f}{listed['rate']:>12.1f}"
            f"{ratio:>9.1f}×   {note}"
        )
    report.say(
        f"   (a baseline stops after {result['baseline_seconds']:.0f} s if it hasn't drained:"
        " its rate is what it sustained)"
    )
    report.say(
        "   "
        + report.target("≥ 5× the naive loop (1,000 backlog)", ratios[1000] >= 5, f"{ratios[1000]:.1f}×")
    )
    report.say()
    listing = result["listing"]
    bound = math.ceil(listing["max"] / 1000) + 1
    report.say(f"3. ListExecutions calls per tick as RUNNING grows (MAX {listing['max']:,})")
    report.say(f"   {'RUNNING':>8}{'dispatcher':>12}{'list-only':>12}")
    worst = 0
    for level in listing["levels"]:
        worst = max(worst, level["dispatcher"])
        report.say(f"   {level['running']:>8,}{level['dispatcher']:>12}{level['list-only']:>12}")
    report.say(
        "   " + report.target(f"≤ ⌈MAX/1000⌉ + 1 = {bound} per tick", worst <= bound, f"at most {worst}")
    )
    report.say()


def report_latency(runs: list[dict[str, Any]], workload: refill.Workload, report: Report) -> None:
    """Section 4: slot freed to next start, both modes."""
    report.say(
        f"4. Slot freed → next start, MAX {workload.max_concurrency}, jobs {workload.shortest:.0f}–"
        f"{workload.longest:.0f} s, {workload.seconds:.0f} s of real time, schedule every"
        f" {workload.schedule_seconds:.0f} s; list lag: a new execution unlisted for up to"
        f" {workload.lag.start:.0f} s, an ended one still listed for up to {workload.lag.end:.0f} s;"
        f" events delivered 0–{refill.EVENT_DELAY_SECONDS:.0f} s after the end"
    )
    report.say(f"   {'mode':<36}{'p50':>8}{'p95':>8}{'starts':>8}{'invocations':>13}")
    for run in runs:
        mode = refill.MODES[(run["refill"], run["batched"])]
        report.say(
            f"   {mode:<36}{run['p50']:>7.1f}s{run['p95']:>7.1f}s{run['starts']:>8}{run['invocations']:>13}"
        )
    for batched, name in ((False, "an invocation an end"), (True, "ends batched")):
        refilled = next(run for run in runs if run["refill"] and run["batched"] is batched)
        report.say(
            "   "
            + report.target(
                f"p95 ≤ 2 s with refill on completion, {name}",
                refilled["p95"] <= 2.0,
                f"{refilled['p95']:.2f} s",
            )
        )
    report.say(f"   plot: {PLOT.relative_to(ROOT)}")
    report.say()


def report_burst(
    runs: list[dict[str, Any]], workload: refill.Workload, window: tuple[float, float], report: Report
) -> None:
    """Section 5: list reads under a burst of completions."""
    report.say(
        f"5. A burst of completions: MAX {workload.max_concurrency}, {workload.shortest:.0f} s jobs"
        f" (100 completions/s if every slot were refilled at once), seconds {window[0]:.0f}–{window[1]:.0f};"
        f" list lag up to {workload.lag.start:.0f} s / {workload.lag.end:.0f} s; no added latency"
    )
    report.say(
        f"   {'LIST_REUSE_SECONDS':<20}{'completions/s':>14}{'starts/s':>10}{'ticks/s':>9}"
        f"{'ListExecutions/s':>18}{'peak in 1 s':>13}{'Describe/s':>12}"
    )
    for run in runs:
        label = "1 (default)" if run["reuse"] == "1" else "0 (every tick)"
        report.say(
            f"   {label:<20}{run['completions']:>14.1f}{run['starts']:>10.1f}{run['invocations']:>9.1f}"
            f"{run['list_calls']:>18.2f}{run['list_calls_peak']:>13}{run['describe_calls']:>12.1f}"
        )
    default = next(run for run in runs if run["reuse"] == "1")
    report.say(
        "   "
        + report.target(
            "≤ 1 ListExecutions per second sustained",
            default["list_calls"] <= 1,
            f"{default['list_calls']:.2f}/s, at most {default['list_calls_peak']} in any second",
        )
    )
    report.say()


def report_quota(runs: list[dict[str, Any]], report: Report) -> None:
    """Section 6: the StartExecution token bucket."""
    first = runs[0]
    report.say(
        f"6. StartExecution against a token bucket of AWS's shape scaled ×{first['scale']}"
        f" ({first['burst']:.0f} burst, {first['refill']:.0f}/s refill;"
        f" AWS: {quota.AWS_BURST:,}/{quota.AWS_REFILL}/s — the emulator serves about 200 starts/s"
        " on two cores, so full scale would measure the emulator)"
    )
    report.say(
        f"   {'retry mode':<22}{'sustained/s':>12}{'of refill':>11}{'throttled':>11}{'started':>9}"
        f"{'lost':>6}{'dup':>5}"
    )
    for run in runs:
        label = f"{run['retry_mode']}{' (shipped)' if run['retry_mode'] == 'standard' else ''}"
        share = run["sustained_rate"] / run["refill"]
        report.say(
            f"   {label:<22}{run['sustained_rate']:>12.1f}{share:>10.0%}{run['throttled_calls']:>11}"
            f"{run['started']:>9,}{run['lost']:>6}{run['duplicated']:>5}"
        )
    shipped = next(run for run in runs if run["retry_mode"] == "standard")
    share = shipped["sustained_rate"] / shipped["refill"]
    met = share >= 0.9 and shipped["lost"] == 0 and shipped["duplicated"] == 0
    report.say(
        "   "
        + report.target(
            "≥ 90 % of the refill rate, 0 lost, 0 duplicated",
            met,
            f"{share:.0%}, {shipped['lost']} lost, {shipped['duplicated']} duplicated",
        )
    )
    report.say()


def report_footprint(result: dict[str, Any], report: Report) -> None:
    """Section 7: import time and artifact size."""
    report.say(f"7. Cold start (median of {result['runs']} fresh interpreters, this machine)")
    for label, seconds in result["imports"].items():
        report.say(f"   import {label:<52}{seconds * 1000:>7.0f} ms")
    artifact = result["artifact"]
    report.say(
        f"   Lambda artifact (arm64, python3.13 wheels): {artifact['unpacked'] / 1e6:.1f} MB unpacked,"
        f" {artifact['zipped'] / 1e6:.1f} MB zipped, {artifact['files']:,} files;"
        f" matplotlib {'IN IT' if artifact['matplotlib'] else 'not in it'}"
    )
    report.say()


def report_full_scale(runs: list[dict[str, Any]], report: Report) -> None:
    """Section 8: the full-scale run at AWS's quotas, both sets of them."""
    first = runs[0]
    report.say(
        f"8. At AWS's quotas, full scale: MAX {full_scale.MAX_CONCURRENCY:,}, jobs of"
        f" {full_scale.SHORTEST:.0f}–{full_scale.LONGEST:.0f} s, a backlog that never drains"
        f" ({full_scale.GROUPS} groups); {first['seconds']:.0f} s measured after"
        f" {full_scale.WARM_UP_SECONDS:.0f} s of warm-up, in the in-memory AWS (virtual time,"
        f" {LATENCY * 1000:.0f} ms a call, list lag ≤ {full_scale.LAG.start:.0f} s"
        f" / {full_scale.LAG.end:.0f} s,"
        " events 0–1 s late); the template's settings, with the ends' path up to 0.5 (an"
        " invocation per end event) beside the template's since (batches from the end-event queue)"
    )
    for line in full_scale.lines(runs):
        report.say(line)
    for name, met, figures in full_scale.targets(runs):
        report.say(f"   {report.target(name, met, figures)}")
    draw_full_scale(runs, FULL_SCALE_PLOT)
    report.say(f"   plot: {FULL_SCALE_PLOT.relative_to(ROOT)}")
    report.say()


def report_lanes(
    runs: list[dict[str, Any]], priority: dict[str, Any], paced: dict[str, Any], report: Report
) -> None:
    """Section 9: twenty lanes in four pools at AWS's quotas; an urgent lane's wait; a lane's rate."""
    report.say(
        f"9. Lanes and pools at AWS's quotas: {len(lanes.POOLS) * lanes.LANES_A_POOL} lanes in"
        f" {len(lanes.POOLS)} pools of MAX {lanes.POOL_MAX:,} (one state machine a lane,"
        f" {lanes.POOL_MAX * len(lanes.POOLS):,} in all), jobs of {full_scale.SHORTEST:.0f}–"
        f"{full_scale.LONGEST:.0f} s, every queue {lanes.WAITING_A_LANE} jobs deep in"
        f" {lanes.GROUPS_A_LANE} groups; {runs[0]['seconds']:.0f} s measured after"
        f" {full_scale.WARM_UP_SECONDS:.0f} s, as section 8 (ends batched, the template's settings)"
    )
    for line in lanes.lines(runs, priority, paced):
        report.say(line)
    for name, met, figures in lanes.targets(runs, priority, paced):
        report.say(f"   {report.target(name, met, figures)}")
    report.say()


def lanes_section(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Section 9, its runs side by side: both sets of quotas, then the priority and rate runs."""
    measured = 120.0 if quick else 600.0
    runs = side_by_side(lanes.run, [(region, measured) for region in full_scale.REGIONS])
    priority, paced = side_by_side(
        lanes.call, [("priority_run", 120.0 if quick else 300.0), ("rate_run", measured)]
    )
    results["lanes"] = {"runs": runs, "priority": priority, "rate": paced}
    report_lanes(runs, priority, paced, report)


def emulator_sections(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Sections 1-7: the dispatcher and its baselines on the embedded emulator, and its footprint."""
    backlogs = [100, 1000] if quick else [100, 1000, 10_000]
    results["throughput"] = in_process(throughput.run, backlogs, LATENCY, 10.0 if quick else 15.0, LISTING)
    report_throughput(results["throughput"], report)

    workload = refill.Workload(
        max_concurrency=10,
        shortest=5,
        longest=15,
        backlog=300,
        groups=20,
        seconds=100 if quick else 150,
        lag=Lag(start=5.0, end=30.0),
    )
    latency_runs = side_by_side(
        refill.latency_run, [(workload, False, False), (workload, True, False), (workload, True, True)]
    )
    results["latency"] = latency_runs
    draw(latency_runs, workload.max_concurrency, workload.seconds, PLOT)
    report_latency(latency_runs, workload, report)

    burst_seconds = 25.0 if quick else 40.0
    burst = refill.Workload(
        max_concurrency=500,
        shortest=5,
        longest=5,
        backlog=int(500 + 100 * burst_seconds),
        groups=100,
        seconds=burst_seconds,
        lag=Lag(start=1.0, end=5.0),
        latency=0.0,
    )
    window = (10.0, burst_seconds)
    results["burst"] = [in_process(refill.burst_run, burst, reuse, window) for reuse in ("1", "0")]
    report_burst(results["burst"], burst, window, report)

    quota_seconds = 20.0 if quick else 30.0
    results["quota"] = [in_process(quota.run, 0.25, mode, quota_seconds) for mode in ("standard", "adaptive")]
    report_quota(results["quota"], report)

    results["footprint"] = in_process(footprint.run, 3 if quick else 7)
    report_footprint(results["footprint"], report)


def main(argv: list[str] | None = None) -> int:
    """Run every section and print the report; 1 when a target is not met."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="shorter runs, no 10,000 backlog")
    parser.add_argument(
        "--only-full-scale", action="store_true", help="only sections 8 and 9: full scale at AWS's quotas"
    )
    parser.add_argument(
        "--skip-full-scale",
        action="store_true",
        help="only sections 1-7 (sections 8 and 9 take most of an hour on two cores)",
    )
    parser.add_argument(
        "--only-lanes", action="store_true", help="only section 9: lanes and pools at AWS's quotas"
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    arguments = parser.parse_args(argv)
    quick = arguments.quick
    began = time.monotonic()
    report = Report()
    report.say(
        "dispatcher benchmark — sections 1-7 on the embedded emulator (moto behind the fault harness's"
        " lag and a latency wire), 8 and 9 on the in-memory AWS;"
        f" {multiprocessing.cpu_count()} cores, Python {platform.python_version()}"
    )
    report.say()
    results: dict[str, Any] = {}

    if not (arguments.only_full_scale or arguments.only_lanes):
        emulator_sections(quick, report, results)

    if not (arguments.skip_full_scale or arguments.only_lanes):
        measured = 120.0 if quick else 600.0
        results["full_scale"] = side_by_side(
            full_scale.run,
            [
                (region, measured, mapping)
                for region in full_scale.REGIONS
                for mapping in (None, EventSourceMapping())
            ],
        )
        report_full_scale(results["full_scale"], report)

    if not arguments.skip_full_scale:
        lanes_section(quick, report, results)

    met = sum(verdict for _, verdict, _ in report.targets)
    report.say(f"targets met: {met} of {len(report.targets)}  ({time.monotonic() - began:.0f} s)")
    for name, verdict, figure in report.targets:
        report.say(f"  {'✔' if verdict else '✘'} {name}: {figure}")
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=1, default=str))
    return 0 if met == len(report.targets) else 1


if __name__ == "__main__":
    sys.exit(main())
