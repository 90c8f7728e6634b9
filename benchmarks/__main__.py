"""`make bench`: the dispatcher against its baselines on the embedded emulator, with figures and a plot.

    make bench                               # everything (about an hour here)
    make bench BENCH_ARGS="--quick"          # shorter runs, no 10,000 backlog
    make bench BENCH_ARGS="--skip-full-scale" # sections 1-7: the embedded emulator
    make bench BENCH_ARGS="--only-full-scale" # sections 8 and 9: AWS's quotas, in the in-memory AWS
    make bench BENCH_ARGS="--only-lanes"      # section 9 alone: lanes and pools at AWS's quotas
    make bench BENCH_ARGS="--only-gates"      # section 10 alone: a gate at AWS's quotas, and its bill
    make bench BENCH_ARGS="--only-rosters"    # section 11 alone: a lost end at long sections, gate and lane
    make bench BENCH_ARGS="--only-tenants"    # section 12 alone: one noisy tenant beside quiet ones
    make bench BENCH_ARGS="--only-jobs"       # section 13 alone: what cancelled and expired jobs cost
    make bench BENCH_ARGS="--only-adaptive"   # section 14 alone: an adaptive pool against a hidden capacity
    make bench BENCH_ARGS="--only-arrival"    # section 15 alone: start on arrival, with wakes and without
    make bench BENCH_ARGS="--only-sizes"      # section 16 alone: jobs of several slots, no starvation

Each section runs in its own process (its own emulator and environment); the two
refill modes run side by side, as they only wait. Every figure is printed next to
the baselines measured in the same run, and each target of issue 7 is checked.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import (
    adaptive,
    arrival,
    footprint,
    full_scale,
    gate_report,
    gates,
    jobs,
    lanes,
    quota,
    refill,
    rosters,
    sizes,
    tenants,
    throughput,
)
from benchmarks.plot import draw, draw_full_scale
from benchmarks.report import (
    LATENCY,
    PLOT,
    ROOT,
    Report,
    report_burst,
    report_footprint,
    report_latency,
    report_quota,
    report_throughput,
)
from tests.support.plans import Lag

FULL_SCALE_PLOT = ROOT / "benchmarks" / "full-scale.png"
LISTING = {"max": 5000, "levels": [0, 999, 1000, 1001, 2500, 5000, 7500]}


def in_process(function: Callable[..., Any], *arguments: Any) -> Any:
    """Run one section in a fresh process (moto and the handler keep global state)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, arguments)


def side_by_side(function: Callable[..., Any], argument_lists: list[tuple[Any, ...]]) -> list[Any]:
    """Run a section's variants at once, each in its own process."""
    with multiprocessing.get_context("spawn").Pool(len(argument_lists)) as pool:
        return pool.starmap(function, argument_lists)


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
        " invocation per end event) beside the template's since (batches from the end-event queue);"
        " and us-east-1's batched run again with its producer waking after each top-up (at most"
        " once a second)"
    )
    report.figures(full_scale.lines(runs), full_scale.targets(runs))
    draw_full_scale([run for run in runs if not run["wakes"]], FULL_SCALE_PLOT)
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
    report.figures(lanes.lines(runs, priority, paced), lanes.targets(runs, priority, paced))
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


def report_gates(runs: list[dict[str, Any]], cost: dict[str, Any], report: Report) -> None:
    """Section 10: a gate at AWS's quotas, and its bill beside the two semaphores people build."""
    report.say(
        f"10. A gate at AWS's quotas: MAX {gates.MAX_CONCURRENCY:,} inside, {gates.WAITING:,} executions"
        f" waiting, sections of {gates.SECTION[0]:.0f}–{gates.SECTION[1]:.0f} s (a ceiling of"
        f" {gates.MAX_CONCURRENCY / (sum(gates.SECTION) / 2):.0f} admissions/s, or SendTaskSuccess's"
        f" refill if lower), {gates.DIES_INSIDE:.1%} of them aborted inside (half without any event);"
        f" {runs[0]['seconds']:.0f} s measured after {full_scale.WARM_UP_SECONDS:.0f} s, as section 8"
    )
    report.figures(gate_report.lines(runs))
    report.say(
        f"   the bill, from a run with {gates.COST_WAITING:,} waiting ({cost['region']} quotas,"
        f" {cost['seconds']:.0f} s measured); the semaphores priced on its waits"
        " (benchmarks/gate_baselines.py)"
    )
    report.figures(gate_report.cost_lines(cost), gate_report.targets(runs, cost))
    report.say()


def gates_section(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Section 10, its runs side by side: both sets of quotas, and the cost run."""
    measured = 120.0 if quick else 600.0
    arguments = [(region, measured) for region in full_scale.REGIONS]
    *runs, cost = side_by_side(
        gates.run, [*arguments, ("us-east-1", 120.0 if quick else 300.0, gates.COST_WAITING)]
    )
    results["gates"] = {"runs": runs, "cost": cost}
    report_gates(runs, cost, report)


def jobs_section(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Section 13: section 8's us-east-1 run without and with 1 % cancelled and 1 % expired jobs."""
    measured = 120.0 if quick else 600.0
    plain, followed, many = side_by_side(
        full_scale.call_run,
        [
            ("us-east-1", measured, False),
            ("us-east-1", measured, True),
            ("us-east-1", measured, False, False, jobs.CANCELLED_UP_FRONT),
        ],
    )
    results["jobs"] = {"plain": plain, "followed": followed, "cancelled_up_front": many}
    report.say(
        f"13. Jobs followed, cancelled and bounded: section 8's us-east-1 run ({measured:.0f} s"
        " measured, ends batched), without and with 1 % of the jobs cancelled as they are sent"
        f" and 1 % received after their StartBy; and without, after {jobs.CANCELLED_UP_FRONT:,}"
        " names were cancelled up front"
    )
    report.figures(jobs.lines(plain, followed, many), jobs.targets(plain, followed, many))
    report.say()


def adaptive_section(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Section 14: an adaptive pool in front of a capacity it is never told, beside two static MAXes."""
    seconds = adaptive.RUN_SECONDS
    every = side_by_side(adaptive.call, [*((*each, seconds) for each in adaptive.RUNS), *adaptive.MORE_RUNS])
    runs, more = every[: len(adaptive.RUNS)], every[len(adaptive.RUNS) :]
    results["adaptive"] = [{key: value for key, value in run.items() if key != "samples"} for run in every]
    changes = ", ".join(f"{capacity} from {at / 60:.0f} min" for at, capacity in adaptive.PHASES)
    report.say(
        f"14. An adaptive limit (us-east-1 quotas, {seconds / 60:.0f} min, MAX {adaptive.MAX_CONCURRENCY}):"
        f" a downstream of capacity C = {changes}, never told to the dispatcher; an execution started"
        f" while C others use it fails {adaptive.THROTTLED_AFTER_SECONDS:.0f} s later with"
        f" {adaptive.THROTTLE_ERROR}; the others run {adaptive.SHORTEST:.0f}-{adaptive.LONGEST:.0f} s;"
        " a backlog that never drains. RUNNING is what the downstream serves (those turned away left out)"
    )
    report.figures(adaptive.lines(runs, more), adaptive.targets(runs, more))
    report.say()


def arrival_section(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Section 15: a job sent to a quiet dispatcher, and a burst, with producers that wake and without."""
    runs = side_by_side(arrival.call, [(name,) for name in arrival.RUNS])
    results["arrival"] = [{key: value for key, value in run.items() if key != "waits"} for run in runs]
    report.say(
        f"15. Start on arrival (us-east-1 quotas, section 8's lag, the template's settings: the schedule"
        f" every minute, ends and wakes batched over 1 s), with producers that wake after each send (at"
        f" most once a second each) and without: {arrival.QUIET_JOBS} jobs at MAX {arrival.QUIET_MAX},"
        f" each sent alone after a quiet spell of"
        f" {arrival.QUIET_SPELL[0]:.0f}–{arrival.QUIET_SPELL[1]:.0f} s;"
        f" a burst of {arrival.BURST_JOBS:,} jobs from {arrival.BURST_PRODUCERS} producers within"
        f" {arrival.BURST_SECONDS:.0f} s at MAX {full_scale.MAX_CONCURRENCY:,}; jobs of"
        f" {full_scale.SHORTEST:.0f}–{full_scale.LONGEST:.0f} s"
    )
    report.figures(arrival.lines(runs), arrival.targets(runs))
    report.say()


def sizes_section(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Section 16: jobs of several slots at a pool of 3,000, beside Airflow's rule and a static MAX."""
    seconds = 1200.0 if quick else sizes.RUN_SECONDS
    runs = side_by_side(sizes.run, [(*each, seconds) for each in sizes.RUNS])
    results["sizes"] = [{key: value for key, value in run.items() if key != "samples"} for run in runs]
    report.say(
        f"16. A job's size (us-east-1 quotas, the template's settings, {seconds / 60:.0f} min measured after"
        f" 1 min, the first {sizes.SETTLING_SECONDS / 60:.0f} min left out): pool default of"
        f" {sizes.MAX_SLOTS:,} slots, a backlog in {sizes.GROUPS} groups of jobs sized like Glue runs"
        f" ({1 - sizes.LARGE_SHARE:.0%} of {sizes.SMALL[0]}-{sizes.SMALL[1]} slots,"
        f" {sizes.LARGE_SHARE:.0%} of {sizes.LARGE[0]}-{sizes.LARGE[1]} in {sizes.LARGE_GROUPS} groups of"
        f" their own), runs of"
        f" {sizes.SHORTEST:.0f}-{sizes.LONGEST:.0f} s; beside Airflow's rule (no reservation), a static"
        f" MAX of slots ÷ largest, and the backlog without sizes (the bill's baseline)"
    )
    report.figures(sizes.lines(runs), sizes.targets(runs))
    report.say()


def rosters_section(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Section 11: the gate and the lane at long sections, side by side; a lost end to its place freed."""
    measured = 600.0 if quick else rosters.MEASURED_SECONDS
    gate, lane = side_by_side(
        rosters.call, [("gate_run", "us-east-1", measured), ("lane_run", "us-east-1", measured)]
    )
    results["rosters"] = {"gate": gate, "lane": lane}
    report.say(
        f"11. Who holds a place, at long sections (us-east-1 quotas, {measured:.0f} s measured after"
        f" {full_scale.WARM_UP_SECONDS:.0f} s): section 10's gate with sections of 9–11 min and"
        f" {rosters.GATE_DIES_INSIDE:.0%} dying inside (half without any event), and section 8's lane with"
        f" executions of 9–11 min and {rosters.LANE_UNREPORTED:.0%} of ends unreported; a lost end, to its"
        " place freed"
    )
    report.figures(rosters.lines(gate, lane), rosters.targets(gate, lane))
    report.say()


def tenants_section(quick: bool, report: Report, results: dict[str, Any]) -> None:
    """Section 12: one noisy tenant beside quiet ones, long executions and short, side by side."""
    measured = 300.0 if quick else tenants.MEASURED_SECONDS
    runs = side_by_side(
        tenants.call,
        [
            (name, measured)
            for name in (
                "fair_share",
                "max_per_group",
                "short",
                "short baseline",
                "fair_share 2 s",
                "max_per_group 2 s",
                "fair_share wakes",
                "max_per_group wakes",
            )
        ],
    )
    results["tenants"] = runs
    report.say(
        f"12. Tenants (us-east-1 quotas, {measured:.0f} s measured after {full_scale.WARM_UP_SECONDS:.0f} s,"
        f" MAX {full_scale.MAX_CONCURRENCY:,}): one noisy message group beside quiet ones — executions of"
        f" {tenants.LONG_SECONDS / 60:.0f} min, {tenants.LONG_NOISY:,} noisy jobs queued and"
        f" {tenants.LONG_QUIET} quiet tenants each sending one every {tenants.LONG_QUIET_EVERY:.0f} s (with"
        f" fair_share; with max_per_group {tenants.GROUP_LIMIT}); and section 8's 5–15 s jobs, the noisy"
        f" tenant keeping {tenants.SHORT_NOISY_WAITING:,} queued and {tenants.SHORT_QUIET:,} quiet ones"
        f" each sending one every {tenants.SHORT_QUIET_EVERY:.0f} s, with fair_share and without;"
        f" the long runs again with ends gathered for {tenants.LONGER_WINDOW_SECONDS:g} s"
        " (EndEventBatchWindow, a trade-off: no target), and with the quiet tenants waking the"
        " dispatcher after each send (the long runs' targets are theirs)"
    )
    report.figures(tenants.lines(runs), tenants.targets(runs))
    report.say()


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
    parser.add_argument(
        "--only-gates", action="store_true", help="only section 10: a gate at AWS's quotas, and its bill"
    )
    parser.add_argument(
        "--only-rosters", action="store_true", help="only section 11: a lost end at long sections"
    )
    parser.add_argument(
        "--only-tenants", action="store_true", help="only section 12: one noisy tenant beside quiet ones"
    )
    parser.add_argument(
        "--only-jobs", action="store_true", help="only section 13: what cancelled and expired jobs cost"
    )
    parser.add_argument(
        "--only-adaptive", action="store_true", help="only section 14: an adaptive pool and a hidden capacity"
    )
    parser.add_argument(
        "--only-arrival",
        action="store_true",
        help="only section 15: start on arrival, with wakes and without",
    )
    parser.add_argument(
        "--only-sizes", action="store_true", help="only section 16: jobs of several slots, no starvation"
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    arguments = parser.parse_args(argv)
    quick = arguments.quick
    began = time.monotonic()
    report = Report()
    report.say(
        "dispatcher benchmark — sections 1-7 on the embedded emulator (moto behind the fault harness's"
        " lag and a latency wire), 8 to 16 on the in-memory AWS;"
        f" {multiprocessing.cpu_count()} cores, Python {platform.python_version()}"
    )
    report.say()
    results: dict[str, Any] = {}

    only = (
        arguments.only_full_scale
        or arguments.only_lanes
        or arguments.only_gates
        or arguments.only_rosters
        or arguments.only_tenants
        or arguments.only_jobs
        or arguments.only_adaptive
        or arguments.only_arrival
        or arguments.only_sizes
    )
    if not only:
        emulator_sections(quick, report, results)

    if not (arguments.skip_full_scale or (only and not arguments.only_full_scale)):
        measured = 120.0 if quick else 600.0
        results["full_scale"] = side_by_side(
            full_scale.call_design,
            [
                *(
                    (region, measured, batched, False)
                    for region in full_scale.REGIONS
                    for batched in (False, True)
                ),
                ("us-east-1", measured, True, True),
            ],
        )
        report_full_scale(results["full_scale"], report)

    if not (arguments.skip_full_scale or (only and not (arguments.only_full_scale or arguments.only_lanes))):
        lanes_section(quick, report, results)

    if not (arguments.skip_full_scale or (only and not arguments.only_gates)):
        gates_section(quick, report, results)
    if not (arguments.skip_full_scale or (only and not arguments.only_rosters)):
        rosters_section(quick, report, results)
    if not (arguments.skip_full_scale or (only and not arguments.only_tenants)):
        tenants_section(quick, report, results)
    if not (arguments.skip_full_scale or (only and not arguments.only_jobs)):
        jobs_section(quick, report, results)
    if not (arguments.skip_full_scale or (only and not arguments.only_adaptive)):
        adaptive_section(quick, report, results)
    if not (arguments.skip_full_scale or (only and not arguments.only_arrival)):
        arrival_section(quick, report, results)
    if not (arguments.skip_full_scale or (only and not arguments.only_sizes)):
        sizes_section(quick, report, results)

    met = sum(verdict for _, verdict, _ in report.targets)
    report.say(f"targets met: {met} of {len(report.targets)}  ({time.monotonic() - began:.0f} s)")
    for name, verdict, figure in report.targets:
        report.say(f"  {'✔' if verdict else '✘'} {name}: {figure}")
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=1, default=str))
    return 0 if met == len(report.targets) else 1


if __name__ == "__main__":
    sys.exit(main())
