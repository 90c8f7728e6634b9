"""The long profile: thousands of generated fault scenarios, with figures.

    make soak                                   # 2000 scenarios on 2 workers
    make soak SOAK_ARGS="--scenarios 200"
    make soak SOAK_ARGS="--first-seed 1234 --scenarios 1"   # replay one seed

Each worker process runs its own faulty emulator and a share of the seeds; the
summary adds up what was processed and injected, and lists every violation with
the seed that reproduces it. The exit status is 1 when any invariant broke.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import os
import sys
import time
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.faults.scenario import Tally

QUIET_ENVIRONMENT = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "CRITICAL",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def run_share(seeds: list[int]) -> Tally:
    """Run ``seeds`` against one faulty emulator in this process."""
    os.environ.update(QUIET_ENVIRONMENT)
    warnings.simplefilter("ignore")
    from dispatcher.emulator import pointed_at  # noqa: PLC0415
    from tests.faults.scenario import Scenario, Tally, run_scenario  # noqa: PLC0415 — after the environment is set
    from tests.faults.world import faulty_moto_server  # noqa: PLC0415

    tally = Tally()
    with faulty_moto_server() as (endpoint_url, middleware), pointed_at(endpoint_url):
        for seed in seeds:
            with contextlib.redirect_stdout(io.StringIO()):  # EMF metrics of every tick
                tally.add(run_scenario(Scenario.generate(seed), middleware))
    return tally


def report(tally: Tally, seeds: range, workers: int, seconds: float) -> str:
    """The summary the soak prints."""
    header = (
        f"soak: {tally.scenarios} scenarios (seeds {seeds.start}-{seeds.stop - 1})"
        f" in {seconds:.0f} s on {workers} worker(s), {tally.scenarios / seconds:.1f} scenarios/s"
    )
    return "\n".join([header, *tally.report()])


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when every invariant held in every scenario."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=2000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    arguments = parser.parse_args(argv)
    seeds = range(arguments.first_seed, arguments.first_seed + arguments.scenarios)
    workers = max(1, min(arguments.workers, len(seeds)))
    shares = [list(seeds[index::workers]) for index in range(workers)]
    started = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        tallies = pool.map(run_share, shares)
    from tests.faults.scenario import Tally  # noqa: PLC0415 — the workers import it after setting the environment

    total = Tally()
    for tally in tallies:
        total.merge(tally)
    print(report(total, seeds, workers, time.monotonic() - started))
    return 1 if total.violations else 0


if __name__ == "__main__":
    sys.exit(main())
