"""The long profile: thousands of generated fault scenarios, with figures.

    make soak                                   # 2000 scenarios on 2 workers
    make soak SOAK_ARGS="--scenarios 200"
    make soak SOAK_ARGS="--first-seed 1234 --scenarios 1"   # replay one seed

Then rounds of two real dispatcher processes ticking at once against one backlog
(`tests/faults/test_overlap.py`), checked for the cap, loss and duplicates.

Each worker process runs its own faulty emulator and a share of the seeds; the
summary adds up what was processed and injected, and lists every violation with
the seed that reproduces it (each is also printed on stderr when it happens). The
exit status is 1 when any invariant broke.
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
    from tests.faults.tally import Tally
    from tests.support.overlap import OverlapRound

QUIET_ENVIRONMENT = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_LOG_LEVEL": "CRITICAL",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


PROGRESS_EVERY = 100
"""A worker's progress line on stderr every this many scenarios."""


def run_share(seeds: list[int]) -> Tally:
    """Run ``seeds`` against one faulty emulator in this process."""
    os.environ.update(QUIET_ENVIRONMENT)
    warnings.simplefilter("ignore")
    from dispatcher.local.account import pointed_at  # noqa: PLC0415
    from tests.faults.run import run_scenario  # noqa: PLC0415 — after the environment is set
    from tests.faults.scenario import Scenario  # noqa: PLC0415
    from tests.faults.tally import Tally  # noqa: PLC0415
    from tests.support.faulty_aws import faulty_moto_server  # noqa: PLC0415

    tally = Tally()
    with faulty_moto_server() as (endpoint_url, middleware), pointed_at(endpoint_url):
        for done, seed in enumerate(seeds, start=1):
            # EMF metrics of every tick; the one-line errors of `dispatcher rerun` runs that AWS failed.
            found = len(tally.violations)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                tally.add(run_scenario(Scenario.generate(seed), middleware))
            for violation in tally.violations[found:]:  # at once, so a run cut short keeps its seeds
                print(f"soak: worker {os.getpid()}: ! {violation}", file=sys.stderr, flush=True)
            if done % PROGRESS_EVERY == 0 or done == len(seeds):
                print(  # the soak's progress, on stderr
                    f"soak: worker {os.getpid()}: {done}/{len(seeds)} scenarios,"
                    f" {len(tally.violations)} violation(s) so far",
                    file=sys.stderr,
                    flush=True,
                )
    return tally


def run_overlaps(seeds: list[int]) -> list[OverlapRound]:
    """Rounds of two dispatcher processes ticking at once, against one faulty emulator on the real clock."""
    os.environ.update(QUIET_ENVIRONMENT)
    warnings.simplefilter("ignore")
    from dispatcher.local.account import pointed_at  # noqa: PLC0415
    from tests.support.faulty_aws import faulty_moto_server  # noqa: PLC0415
    from tests.support.overlap import overlap_round  # noqa: PLC0415

    with faulty_moto_server() as (endpoint_url, middleware), pointed_at(endpoint_url):
        return [overlap_round(middleware, endpoint_url, seed) for seed in seeds]


def report(tally: Tally, seeds: range, workers: int, seconds: float, overlaps: list[OverlapRound]) -> str:
    """The summary the soak prints."""
    header = (
        f"soak: {tally.scenarios} scenarios (seeds {seeds.start}-{seeds.stop - 1})"
        f" in {seconds:.0f} s on {workers} worker(s), {tally.scenarios / seconds:.1f} scenarios/s"
    )
    lines = [header, *tally.report()]
    if overlaps:
        violations = [f"  ! overlap seed {item.seed}: {v}" for item in overlaps for v in item.violations]
        lines += [
            f"overlap: {len(overlaps)} rounds of two dispatcher processes ticking at once (real clock)",
            f"  jobs started{'':<36} {sum(item.started for item in overlaps):>9,}",
            f"  ticks{'':<43} {sum(item.ticks for item in overlaps):>9,}",
            f"    {'busy (the other process held the lease)':<44} {sum(item.busy for item in overlaps):>9,}",
            f"  violations{'':<38} {len(violations):>9,}",
            *violations[:20],
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when every invariant held in every scenario."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=2000)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--overlap-rounds",
        type=int,
        default=40,
        help="rounds of two processes ticking at once (after the scenarios)",
    )
    arguments = parser.parse_args(argv)
    seeds = range(arguments.first_seed, arguments.first_seed + arguments.scenarios)
    workers = max(1, min(arguments.workers, len(seeds)))
    shares = [list(seeds[index::workers]) for index in range(workers)]
    started = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        tallies = pool.map(run_share, shares)
    from tests.faults.tally import Tally  # noqa: PLC0415 — the workers import it after setting the environment

    total = Tally()
    for tally in tallies:
        total.merge(tally)
    seconds = time.monotonic() - started
    overlap_seeds = list(range(arguments.first_seed, arguments.first_seed + arguments.overlap_rounds))
    overlaps = []
    if overlap_seeds:
        print(  # the soak's progress, on stderr
            f"soak: {total.scenarios} scenarios in {seconds:.0f} s, {len(total.violations)} violation(s);"
            f" now {len(overlap_seeds)} overlap rounds",
            file=sys.stderr,
            flush=True,
        )
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            overlaps = pool.apply(run_overlaps, (overlap_seeds,))
    print(report(total, seeds, workers, seconds, overlaps))
    return 1 if total.violations or any(item.violations for item in overlaps) else 0


if __name__ == "__main__":
    sys.exit(main())
