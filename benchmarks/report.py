"""The report of `make bench`: its lines, its targets' verdicts, and sections 1-7's figures."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks import quota, refill

ROOT = Path(__file__).parents[1]
PLOT = ROOT / "benchmarks" / "refill-on-completion.png"
LATENCY = 0.02
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


class Report:
    """Collects lines and target verdicts."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.targets: list[tuple[str, bool, str]] = []

    def say(self, line: str = "") -> None:
        """Print a line of the report."""
        print(line, flush=True)
        self.lines.append(line)

    def figures(self, lines: Iterable[str], targets: Iterable[tuple[str, bool, str]] = ()) -> None:
        """A section's figures, then each of its targets' verdicts, a line each."""
        for line in lines:
            self.say(line)
        for name, met, measured in targets:
            self.say(f"   {self.target(name, met, measured)}")

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
