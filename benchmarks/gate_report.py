"""Section 10's report: a gate's admissions at AWS's quotas, its leaks, its bill beside the semaphores'."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from benchmarks import gate_baselines
from benchmarks.gates import MAX_CONCURRENCY, bill, ceiling, percentile
from dispatcher.core import quotas

THROUGHPUT_SHARE = 0.90
LISTS_PER_SECOND = 2.0
LEAK_WITH_EVENT_SECONDS = 3.0
LEAK_WITHOUT_EVENT_SECONDS = 120.0
BILL_SHARE = 0.05
KINDS = ("with its event", "without any event")
WIDTH = 26


def _per_second(result: dict[str, Any], count: float) -> float:
    return count / result["seconds"]


def _share(result: dict[str, Any]) -> float:
    return _per_second(result, result["admissions"]) / ceiling(result)


def _leak(result: dict[str, Any], kind: str, what: str = "next") -> float:
    return percentile(result["leaks"][f"{what} {kind}"], 0.95)


def lines(results: list[dict[str, Any]]) -> list[str]:
    """The throughput runs: one column per set of quotas."""
    say = [f"   {'':<46}" + "".join(f"{r['region'] + ' quotas':>{WIDTH}}" for r in results)]

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        say.append(f"   {label:<46}" + "".join(f"{cell(r):>{WIDTH}}" for r in results))

    row(
        "admissions/s (of the ceiling)",
        lambda r: f"{_per_second(r, r['admissions']):.1f} of {ceiling(r):.0f} ({_share(r):.0%})",
    )
    row(
        "wait at the gate, median / p95",
        lambda r: f"{percentile(r['waited'], 0.5):.0f} / {percentile(r['waited'], 0.95):.0f} s",
    )
    row("Lambda invocations/s", lambda r: f"{_per_second(r, r['invocations']):.1f}")
    say.append("   calls/s against each quota (throttled calls)")
    for operation in ("SendTaskSuccess", "ListExecutions", "DescribeExecution", "ReceiveMessage", "Query"):

        def calls(r: dict[str, Any], operation: str = operation) -> str:
            quota = r["quotas"].get(operation)
            of = f" / {quota:.0f}" if quota is not None else ""
            throttled = r["throttles"].get(operation, 0)
            return f"{_per_second(r, r['calls'].get(operation, 0)):.2f}{of} ({throttled})"

        row(f"  {operation}", calls)
    for name, kinds in results[0]["partitions"].items():
        for kind, quota in (
            ("WriteRequestUnits", quotas.DYNAMODB_PARTITION_WRITES),
            ("ReadRequestUnits", quotas.DYNAMODB_PARTITION_READS),
        ):
            if kind in kinds:
                label = f"  {'write' if kind == 'WriteRequestUnits' else 'read'} units/s, {name}"
                row(label, lambda r, name=name, kind=kind, quota=quota: _units(r, name, kind, quota.refill))
    say.append(
        "   an execution dead inside: to its place freed (to the next admission), p95 of the deaths"
        " (one never freed counts to the run's end)"
    )
    for kind in KINDS:
        row(
            f"  {kind}",
            lambda r, kind=kind: (
                f"{_leak(r, kind, 'freed'):.1f} s ({_leak(r, kind):.1f} s)"
                f" of {len(r['leaks'][f'freed {kind}'])}"
            ),
        )
    row(
        "  never freed by the run's end, with / without",
        lambda r: " / ".join(str(len(r["leaks"][f"unfreed {kind}"])) for kind in KINDS),
    )
    row(
        "over the cap, taken twice, skipped",
        lambda r: f"{len(r['violations'])}, {r['taken_twice']}, {r['never_admitted']}",
    )
    problems = [f"{r['region']}: {r['errors']} {r['violations'][:3]}" for r in results if not _sound(r)]
    return say + [f"   ! {problem}" for problem in problems]


def _sound(result: dict[str, Any]) -> bool:
    """Nothing over the cap, no error, no token taken twice, no request skipped."""
    return not (result["violations"] or result["errors"] or result["taken_twice"] or result["never_admitted"])


def _units(result: dict[str, Any], name: str, kind: str, refill: float) -> str:
    return f"{_per_second(result, result['partitions'][name][kind]):.0f} / {refill:.0f}"


def semaphores(cost: dict[str, Any]) -> list[gate_baselines.Semaphore]:
    """The gate as measured in the cost run, and the two semaphores on its waits."""
    waits, seconds, region = cost["waited"], cost["seconds"], cost["region"]
    return [
        gate_baselines.gate(cost, bill(cost)),
        gate_baselines.wait_loop(waits, seconds, MAX_CONCURRENCY, region),
        gate_baselines.counter(waits, seconds, region),
    ]


def cost_lines(cost: dict[str, Any]) -> list[str]:
    """The cost run: per execution and per million admissions, the gate beside the two semaphores."""
    approaches = semaphores(cost)
    say = [f"   {'':<46}" + "".join(f"{a.name:>{WIDTH}}" for a in approaches)]

    def row(label: str, cell: Callable[[gate_baselines.Semaphore], str]) -> None:
        say.append(f"   {label:<46}" + "".join(f"{cell(a):>{WIDTH}}" for a in approaches))

    row("transitions per execution while waiting", lambda a: f"{a.transitions_waiting:.1f}")
    say.append("   calls it needs at the run's pace, of each quota:")
    for approach in approaches:
        rates, quota = approach.calls_per_second, approach.quota
        needs = ", ".join(f"{api} {rate:,.1f}/s of {quota[api]:,.0f}" for api, rate in rates.items())
        verdict = "throttled" if approach.throttled() else "within the quotas"
        say.append(f"     {approach.name}: {needs}: {verdict}")
    say.append("   per million admissions, what waiting and admitting cost (us-east-1 list prices):")
    for approach in approaches:
        for label, amount in approach.bill:
            say.append(f"     {approach.name + ': ' + label:<84}${amount:>11,.2f}")
    row("  total", lambda a: f"${a.mechanism:,.2f}")
    row(
        f"  + {gate_baselines.TRANSITIONS_TO_ENTER_AND_LEAVE} transitions to enter and leave (each pays)",
        lambda a: f"${gate_baselines.enter_and_leave():,.2f}",
    )
    row("  all in", lambda a: f"${a.all_in:,.2f}")
    row("  the gate's share (waiting and admitting / all in)", lambda a: _ratio(approaches[0], a))
    return say


def _ratio(gate: gate_baselines.Semaphore, other: gate_baselines.Semaphore) -> str:
    return f"{gate.mechanism / other.mechanism:.1%} / {gate.all_in / other.all_in:.1%}"


def targets(results: list[dict[str, Any]], cost: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Each target of the section, on both sets of quotas (and the cost run's bill)."""

    def each(measure: Callable[[dict[str, Any]], Any], fmt: str) -> str:
        return ", ".join(f"{r['region']} {fmt.format(measure(r))}" for r in results)

    def lists(r: dict[str, Any]) -> float:
        return _per_second(r, r["calls"].get("ListExecutions", 0))

    gate, wait_loop, _ = semaphores(cost)
    share = gate.mechanism / wait_loop.mechanism
    return [
        (
            f"admissions ≥ {THROUGHPUT_SHARE:.0%} of the ceiling",
            all(_share(r) >= THROUGHPUT_SHARE for r in results),
            each(_share, "{:.1%}"),
        ),
        (
            "no SendTaskSuccess throttled",
            all(r["throttles"].get("SendTaskSuccess", 0) == 0 for r in results),
            each(lambda r: r["throttles"].get("SendTaskSuccess", 0), "{}"),
        ),
        (
            f"ListExecutions ≤ {LISTS_PER_SECOND:.0f}/s",
            all(lists(r) <= LISTS_PER_SECOND for r in results),
            each(lists, "{:.2f}/s"),
        ),
        (
            "the cap held, 0 admitted twice, 0 requests lost",
            all(_sound(r) for r in results),
            each(lambda r: len(r["violations"]) + r["taken_twice"] + r["never_admitted"], "{}"),
        ),
        (
            f"a death inside with its event, to the next admission ≤ {LEAK_WITH_EVENT_SECONDS:.0f} s at p95",
            all(_leak(r, KINDS[0]) <= LEAK_WITH_EVENT_SECONDS for r in results),
            each(lambda r: _leak(r, KINDS[0]), "{:.1f} s"),
        ),
        (
            f"a death inside, no event, to the next admission ≤ {LEAK_WITHOUT_EVENT_SECONDS:.0f} s at p95",
            all(_leak(r, KINDS[1]) <= LEAK_WITHOUT_EVENT_SECONDS for r in results),
            each(lambda r: _leak(r, KINDS[1]), "{:.1f} s"),
        ),
        (
            f"the gate's bill of waiting and admitting ≤ {BILL_SHARE:.0%} of the Wait-loop's,"
            " 0 transitions while waiting",
            share <= BILL_SHARE and gate.transitions_waiting == 0,
            f"{share:.1%} at a {statistics.mean(cost['waited']):.0f} s mean wait"
            f" (all in: {gate.all_in / wait_loop.all_in:.1%}), {gate.transitions_waiting:.0f} transitions",
        ),
    ]
