"""Watch one noisy tenant and twenty quiet ones share a pool, without fair share and with it (embedded AWS).

Starts moto's server on 127.0.0.1 (state machines really run) and runs the same load
twice, on a stack each: the noisy tenant (one message group) sends a backlog that fills the
pool; a few ticks later each quiet tenant (a group each) sends one job. Without
``fair_share`` the noisy tenant's older jobs take each slot that frees, and the quiet
tenants wait behind its backlog; with it, each freed slot goes to a tenant holding fewest,
so the noisy tenant gets at most one slot a tick (once it holds no more than they do: ties
go to the group received first) until every quiet job started. Every tick prints RUNNING by
tenant; ``--plot PATH`` draws each tenant's RUNNING executions for both runs (matplotlib:
the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import boto3

from dispatcher.in_process import LocalContext
from dispatcher.local.account import environment, pointed_at
from dispatcher.local.server import moto_server
from dispatcher.local.stack import create_stack, send_jobs
from tools.demo import _count, bar, interruptible, queue_depth

NOISY = "noisy"


@dataclass
class Run:
    """One run: each tenant's RUNNING, tick after tick, and when each job started."""

    fair: bool
    seconds: list[float] = field(default_factory=list)
    running: dict[str, list[int]] = field(default_factory=dict)
    """Tenant → its RUNNING at each tick."""
    started: list[str] = field(default_factory=list)
    """Job names, in start order."""
    tick_of: dict[str, int] = field(default_factory=dict)
    """Job name → the look (tick) that first saw it started."""
    quiet_at: float = 0.0
    quiet_index: int = 0
    """How many had started when the quiet jobs were sent."""
    peak: int = 0


def jobs(tenant: str, count: int) -> list[dict[str, str]]:
    """``count`` jobs of one tenant (its message group), named ``<tenant>-<n>``."""
    return [
        {"body": json.dumps({"job": f"{tenant}-{index}"}), "group": tenant, "name": f"{tenant}-{index}"}
        for index in range(count)
    ]


def tenant_of(name: str) -> str:
    """The tenant a job's name belongs to."""
    return name.rsplit("-", 1)[0]


def look(state_machine_arn: str, run: Run, tenants: list[str], now: float) -> int:
    """Note each tenant's RUNNING and the executions started since; RUNNING in all."""
    client = boto3.client("stepfunctions")
    pages = client.get_paginator("list_executions").paginate(stateMachineArn=state_machine_arn)
    executions = [execution for page in pages for execution in page["executions"]]
    known = set(run.started)
    new = [
        execution["name"]
        for execution in sorted(executions, key=lambda execution: execution["startDate"])
        if execution["name"] not in known
    ]
    run.started += new
    run.tick_of.update(dict.fromkeys(new, len(run.seconds)))
    running = [execution["name"] for execution in executions if execution["status"] == "RUNNING"]
    run.seconds.append(now)
    for tenant in tenants:
        run.running.setdefault(tenant, []).append(sum(tenant_of(name) == tenant for name in running))
    run.peak = max(run.peak, len(running))
    return len(running)


def one_run(arguments: argparse.Namespace, *, fair: bool) -> Run:
    """The load on a fresh stack, ``fair`` or not, ticked until every job ran."""
    tenants = [NOISY, *(f"quiet{index:02d}" for index in range(arguments.quiet))]
    stack = create_stack(wait_seconds=arguments.duration)
    variables = {
        **stack.environment(arguments.max, receive_wait_seconds=0, fair_share=fair),
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
    }
    run = Run(fair)
    with environment(variables):
        from dispatcher import handler  # noqa: PLC0415 — import after the environment is set

        handler.reset_clients()
        send_jobs(stack.queue_url, jobs(NOISY, arguments.noisy))
        began = time.monotonic()
        print(f"\n{'with' if fair else 'without'} fair share:")
        for tick in range(1, 10_000):
            if tick == arguments.quiet_tick:
                send_jobs(stack.queue_url, [job for tenant in tenants[1:] for job in jobs(tenant, 1)])
                run.quiet_at = time.monotonic() - began
                run.quiet_index = len(run.started)
            result = handler.lambda_handler({}, LocalContext())
            running = look(stack.state_machine_arn, run, tenants, time.monotonic() - began)
            noisy = run.running[NOISY][-1]
            print(
                f"tick {tick:3d}  queued {queue_depth(stack.queue_url):3d}"
                f"  running {bar(running, arguments.max)} noisy {noisy} + quiet {running - noisy}"
                f" / {arguments.max}  started +{result['started']}"
            )
            if tick >= arguments.quiet_tick and queue_depth(stack.queue_url) == 0 and running == 0:
                return run
            if time.monotonic() - began > arguments.timeout:
                raise SystemExit(f"tenants demo: gave up after {arguments.timeout}s")
            time.sleep(arguments.interval)
    return run


def plot(runs: list[Run], maximum: int, path: Path) -> None:
    """Each tenant's RUNNING, stacked, against MAX: without fair share above, with it below."""
    try:
        import matplotlib  # noqa: PLC0415 — local-only, and only for --plot

        matplotlib.use("Agg")
        from matplotlib import pyplot  # noqa: PLC0415
        from matplotlib.ticker import MaxNLocator  # noqa: PLC0415
    except ImportError:
        raise SystemExit(
            "tenants demo: --plot needs matplotlib: pip install 'stepfunctions-dispatcher[bench]'"
        ) from None
    figure, panels = pyplot.subplots(len(runs), 1, figsize=(10, 6), sharex=True)
    for axes, run in zip(panels, runs, strict=True):
        tenants = list(run.running)
        colours = ["tab:red"] + [
            pyplot.get_cmap("viridis")(index / max(1, len(tenants) - 1)) for index in range(1, len(tenants))
        ]
        axes.stackplot(run.seconds, *(run.running[tenant] for tenant in tenants), colors=colours, step="post")
        axes.axhline(maximum, color="black", linestyle="--")
        axes.axvline(run.quiet_at, color="grey", linestyle=":")
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylim(0, maximum + 1)
        axes.set_ylabel("RUNNING")
        axes.set_title(
            f"{'with' if run.fair else 'without'} fair share: the noisy tenant (red) and"
            f" {len(tenants) - 1} quiet ones, one colour each; MAX {maximum} dashed,"
            " the quiet jobs' arrival dotted",
            fontsize=9,
        )
    panels[-1].set_xlabel("seconds")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def quiet_ahead(run: Run) -> tuple[int, int, int]:
    """(quiet jobs started, noisy jobs started after them in ticks before the last quiet start, those ticks).

    In the tick that starts the last quiet jobs, the slots they leave go to the noisy
    tenant (work-conserving): those are not ahead of them. The ticks counted are those
    that started something while quiet jobs waited.
    """
    quiet = [name for name in run.started if tenant_of(name) != NOISY]
    if not quiet:
        return 0, 0, 0
    last = max(run.tick_of[name] for name in quiet)
    waited = [name for name in run.started[run.quiet_index :] if run.tick_of[name] < last]
    ahead = [name for name in waited if tenant_of(name) == NOISY]
    return len(quiet), len(ahead), len({run.tick_of[name] for name in waited})


def run_demo(arguments: argparse.Namespace) -> int:
    """Both runs, the checks, and the plot; the exit code."""
    with moto_server() as endpoint_url, pointed_at(endpoint_url), contextlib.ExitStack():
        print(
            f"tenants demo: the noisy tenant sends {arguments.noisy} jobs, then at tick"
            f" {arguments.quiet_tick} {arguments.quiet} quiet tenants send one each; MAX {arguments.max},"
            f" each job runs {arguments.duration}s"
        )
        runs = [one_run(arguments, fair=False), one_run(arguments, fair=True)]
    unfair, fair = (quiet_ahead(run) for run in runs)
    total = arguments.noisy + arguments.quiet
    checks = [
        (all(run.peak <= arguments.max for run in runs), f"cap held in both: RUNNING ≤ MAX {arguments.max}"),
        (all(len(run.started) == total for run in runs), f"{total} executions in each run, one per job"),
        (
            fair[0] == arguments.quiet and fair[1] <= fair[2] and fair[1] < unfair[1],
            f"with fair share, {fair[0]} quiet jobs started while the noisy tenant started {fair[1]}"
            f" (at most one a tick: once it held no more than they did)",
        ),
        (
            unfair[1] > fair[1],
            f"without it, {unfair[1]} of the noisy tenant's older jobs started before the last quiet one",
        ),
    ]
    print()
    for passed, line in checks:
        print(f"  {'✔' if passed else '✘'} {line}")
    if arguments.plot is not None:
        plot(runs, arguments.max, arguments.plot)
        print(f"\nplot: {arguments.plot}")
    return 0 if all(passed for passed, _ in checks) else 1


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options of the tenants demo."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=_count(1), default=6, help="MAX (default 6)")
    parser.add_argument("--noisy", type=_count(1), default=40, help="the noisy tenant's jobs (default 40)")
    parser.add_argument("--quiet", type=_count(1), default=20, help="quiet tenants, a job each (default 20)")
    parser.add_argument("--quiet-tick", type=_count(1), default=3, help="the tick they send at (default 3)")
    parser.add_argument("--duration", type=int, default=2, help="seconds each job runs (default 2)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks (default 1)")
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    parser.add_argument("--plot", type=Path, metavar="PATH", help="draw each tenant's RUNNING as a PNG")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m tools.tenants_demo`; Ctrl-C stops it with one line."""
    return interruptible(run_demo, parse_arguments(argv), "tenants demo")


if __name__ == "__main__":
    sys.exit(main())
