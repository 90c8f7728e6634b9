"""The fast profile's seeds, chosen by measurement: the most drawn for the fewest CPU-seconds.

    python -m tests.faults.profile                      # seeds 0-47, a budget of 35 CPU-s
    python -m tests.faults.profile --seeds 96 --budget 40

Each generated scenario is run twice in a worker process: once as the suite runs it, for
its CPU time, and once under coverage, for what it draws. What a scenario draws is the
branches of `dispatcher/` it takes (coverage's arcs) and what its run reports: each kind
of fault injected, each AWS action called, each key of the ticks' return values and each
figure of its `Outcome` that is not zero (a crash, a busy tick, a re-run, ...). Seeds are
then chosen greedily, most new draws per CPU-second first, within the budget. The output
says what the choice draws beside what all the seeds and the first N draw.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import os
import time
import warnings
from dataclasses import dataclass

from tests.faults.soak import QUIET_ENVIRONMENT

FIGURES = (
    "crashes",
    "event_ticks",
    "warm_ticks",
    "busy_ticks",
    "failures",
    "reruns",
    "rerun_crashes",
    "rerun_jobs",
    "rerun_switches",
    "rerun_refused",
    "redriven",
    "admissions",
    "refused_tokens",
)
"""The `Outcome` figures whose being non-zero is a draw of its own: not those every scenario has
(messages, ticks, executions), and not `Tally`'s, which adds up a scenario's figures by field."""


@dataclass(frozen=True)
class Measured:
    """One seed: its CPU time as the suite runs it, and what it draws."""

    seed: int
    cpu: float
    draws: frozenset[str]


def measure(seeds: list[int]) -> list[Measured]:
    """Run ``seeds`` against one faulty emulator in this process, each untraced and then traced."""
    os.environ.update(QUIET_ENVIRONMENT)
    warnings.simplefilter("ignore")
    import coverage  # noqa: PLC0415

    from dispatcher.local.account import pointed_at  # noqa: PLC0415
    from tests.faults.run import run_scenario  # noqa: PLC0415 — after the environment is set
    from tests.faults.scenario import Scenario  # noqa: PLC0415
    from tests.support.faulty_aws import faulty_moto_server  # noqa: PLC0415

    measured = []
    with faulty_moto_server() as (endpoint_url, middleware), pointed_at(endpoint_url):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            run_scenario(Scenario.generate(seeds[0]), middleware)  # imports and first calls, untimed
        for seed in seeds:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                began = time.process_time()
                run_scenario(Scenario.generate(seed), middleware)
                cpu = time.process_time() - began
                traced = coverage.Coverage(data_file=None, branch=True, source=["dispatcher"])
                traced.start()
                try:
                    outcome = run_scenario(Scenario.generate(seed), middleware)
                finally:
                    traced.stop()
            data = traced.get_data()
            draws = {
                f"branch {os.path.relpath(path)} {arc}"
                for path in data.measured_files()
                for arc in data.arcs(path) or ()
            }
            draws |= {f"injected {kind}" for kind in outcome.injected}
            draws |= {f"reported {key}" for key, count in outcome.reported.items() if count}
            draws |= {f"called {call.action}" for call in outcome.calls}
            draws |= {f"figure {name}" for name in FIGURES if getattr(outcome, name)}
            measured.append(Measured(seed, cpu, frozenset(draws)))
    return measured


def choose(measured: list[Measured], budget: float) -> list[Measured]:
    """Greedily the seeds with the most new draws per CPU-second, within ``budget`` CPU-seconds."""
    chosen: list[Measured] = []
    drawn: set[str] = set()
    spent = 0.0
    while True:
        fits = [
            each
            for each in measured
            if each not in chosen and spent + each.cpu <= budget and each.draws - drawn
        ]
        if not fits:
            return chosen
        best = max(fits, key=lambda each: len(each.draws - drawn) / each.cpu)
        chosen.append(best)
        drawn |= best.draws
        spent += best.cpu


def _line(label: str, chosen: list[Measured], every: frozenset[str]) -> str:
    """What a set of seeds costs and draws, of what every seed measured draws."""
    drawn = frozenset().union(*(each.draws for each in chosen))
    reported = {draw for draw in every if not draw.startswith("branch ")}
    return (
        f"{label}: {sum(each.cpu for each in chosen):.1f} CPU-s, {len(drawn & every):,} of {len(every):,}"
        f" draws ({len(drawn & reported)} of {len(reported)} outside the branches)"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure the seeds on two workers, choose within the budget and print the comparison."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.profile", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=48, help="measure seeds 0 to N-1 (default 48)")
    parser.add_argument(
        "--budget", type=float, default=35.0, help="CPU-seconds to choose within (default 35)"
    )
    parser.add_argument("--first", type=int, default=16, help="compare with seeds 0 to N-1 (default 16)")
    arguments = parser.parse_args(argv)
    seeds = list(range(arguments.seeds))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        shares = pool.map(measure, [seeds[0::2], seeds[1::2]])
    measured = sorted((each for share in shares for each in share), key=lambda each: each.seed)
    every = frozenset().union(*(each.draws for each in measured))
    chosen = choose(measured, arguments.budget)
    print(_line(f"all {len(measured)} seeds", measured, every))
    print(_line(f"seeds 0-{arguments.first - 1}", measured[: arguments.first], every))
    print(_line(f"chosen within {arguments.budget:g} CPU-s", chosen, every))
    print("chosen seeds:", ", ".join(str(each.seed) for each in sorted(chosen, key=lambda each: each.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
