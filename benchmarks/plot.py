"""The picture: RUNNING against MAX over time, schedule only versus refill on completion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.refill import MODES

STEP_SECONDS = 0.25


def draw(runs: list[dict[str, Any]], max_concurrency: int, seconds: float, path: Path) -> None:
    """A panel a run on one time axis: RUNNING (ground truth), MAX, each start and each completion."""
    import matplotlib as mpl  # noqa: PLC0415 — a benchmark-only dependency

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(len(runs), 1, figsize=(10, 2.6 * len(runs)), sharex=True, sharey=True)
    for axis, run in zip(axes, runs, strict=True):
        times = [index * STEP_SECONDS for index in range(len(run["running"]))]
        axis.step(times, run["running"], where="post", color="tab:blue", linewidth=1.4, label="RUNNING")
        axis.axhline(
            max_concurrency, color="tab:red", linestyle="--", linewidth=1, label=f"MAX {max_concurrency}"
        )
        axis.plot(
            run["starts_at"],
            [max_concurrency + 0.9] * len(run["starts_at"]),
            "|",
            color="tab:green",
            markersize=7,
            label="start",
        )
        axis.plot(
            run["ends_at"],
            [-0.9] * len(run["ends_at"]),
            "|",
            color="tab:gray",
            markersize=7,
            label="completion",
        )
        title = MODES[(run["refill"], run["batched"])] if run["refill"] else "schedule only (every 60 s)"
        axis.set_title(
            f"{title}: {len(run['starts_at'])} starts, slot freed → next start p50 {run['p50']:.1f} s,"
            f" p95 {run['p95']:.1f} s",
            fontsize=10,
            loc="left",
        )
        axis.set_ylim(-2, max_concurrency + 2)
        axis.set_ylabel("executions")
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8, ncols=4)
    axes[-1].set_xlabel("seconds")
    axes[-1].set_xlim(0, seconds)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def draw_full_scale(runs: list[dict[str, Any]], path: Path) -> None:
    """Sustained starts/s over time against StartExecution's refill, per set of quotas and design."""
    import matplotlib as mpl  # noqa: PLC0415 — a benchmark-only dependency

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    regions = list(dict.fromkeys(run["region"] for run in runs))
    figure, axes = plt.subplots(len(regions), 1, figsize=(10, 3.0 * len(regions)), sharex=True)
    colours = {"an invocation per end event": "tab:gray", "batched end events": "tab:blue"}
    labels = {
        "an invocation per end event": "an invocation per end (0.5)",
        "batched end events": "batched ends",
    }
    for axis, region in zip(axes, regions, strict=True):
        ours = [run for run in runs if run["region"] == region]
        refill = ours[0]["quotas"]["StartExecution"]
        step = ours[0]["timeline_seconds"]
        for run in ours:
            times = [index * step for index in range(len(run["timeline"]))]
            axis.step(
                times,
                run["timeline"],
                where="post",
                color=colours[run["design"]],
                linewidth=1.3,
                label=f"{labels[run['design']]}: {run['starts'] / run['seconds']:.0f}/s measured",
            )
        axis.axhline(
            refill,
            color="tab:red",
            linestyle="--",
            linewidth=1,
            label=f"StartExecution refill {refill:.0f}/s",
        )
        axis.axhline(0.9 * refill, color="tab:red", linestyle=":", linewidth=1, label="90 %")
        axis.axvline(ours[0]["warm_up_seconds"], color="black", linewidth=0.6, alpha=0.5)
        axis.set_title(f"{region} quotas: starts/s, MAX 3,000, jobs of 5-15 s", fontsize=10, loc="left")
        axis.set_ylim(0, refill * 1.15)
        axis.set_ylabel("starts/s")
        axis.grid(axis="y", alpha=0.3)
        axis.legend(loc="lower right", fontsize=8, ncols=2)
    axes[-1].set_xlabel("simulated seconds (measured after the warm-up line)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
