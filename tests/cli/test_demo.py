"""`make demo`'s edge cases: nothing to do, a pause, a bad argument and Ctrl-C each end cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tools import adaptive_demo, demo, gates_demo, lanes_demo, sizes_demo, tenants_demo

pytestmark = pytest.mark.no_cover
"""Journeys, not line tests: the demos run the dispatcher's lines that its own tests measure
(measured, these added none of the suite's covered lines; CONTRIBUTING, "The suite's time")."""

ROOT = Path(__file__).parents[2]


def test_demo_with_no_jobs_passes(capsys: pytest.CaptureFixture[str]) -> None:
    """`--jobs 0 --poison 0` has nothing to drain and reports every guarantee held."""
    assert demo.main(["--jobs", "0", "--poison", "0", "--interval", "0.1"]) == 0
    assert "all guarantees held" in capsys.readouterr().out


def test_demo_at_max_zero_stops_at_once_and_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """`--max 0` is a pause: one tick, no start, every message still queued."""
    assert demo.main(["--max", "0", "--jobs", "3", "--poison", "1", "--timeout", "20"]) == 0
    out = capsys.readouterr().out
    assert "dispatcher demo: 3 jobs + 1 poison" in out
    assert "nothing lost: 4 of 4 messages still queued" in out


def test_demo_rejects_zero_groups_as_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`--groups 0` is refused with a one-line reason, not a ZeroDivisionError."""
    with pytest.raises(SystemExit) as exited:
        demo.main(["--groups", "0"])
    assert exited.value.code == 2
    assert "argument --groups: expected an integer >= 1" in capsys.readouterr().err


def test_demo_dead_letter_column_is_cumulative(capsys: pytest.CaptureFixture[str]) -> None:
    """The dead-lettered column counts every poison message so far, like "done"."""
    assert (
        demo.main(["--jobs", "2", "--poison", "2", "--groups", "2", "--duration", "1", "--interval", "0.3"])
        == 0
    )
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("tick")]
    assert rows[-1].endswith("dead-lettered 2")


def test_demo_interrupted_by_ctrl_c_says_so_in_one_line() -> None:
    """Ctrl-C during `make demo` ends it with exit status 130 and one line, no traceback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.demo", "--jobs", "20", "--duration", "30"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    for line in iter(process.stdout.readline, ""):
        if line.startswith("tick"):
            break  # draining: the emulator runs and the handler ticks
    process.send_signal(signal.SIGINT)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 130, errors
    assert "Traceback" not in errors
    assert (
        errors.splitlines()[-1]
        == "demo: interrupted; nothing to clean up (the emulator lived in this process)"
    )


def test_the_lanes_demo_shows_the_urgent_lane_overtaking_the_backfill_and_draws_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two lanes in one pool: the cap holds, the urgent jobs start before any more backfill, a PNG."""
    plot = tmp_path / "lanes.png"
    arguments = ["--max", "2", "--backfill", "5", "--urgent", "2", "--urgent-tick", "2", "--duration", "1"]
    assert lanes_demo.main([*arguments, "--interval", "0.3", "--timeout", "120", "--plot", str(plot)]) == 0
    printed = capsys.readouterr().out
    assert "✔ cap held: highest RUNNING seen 2 ≤ pool MAX 2" in printed
    assert "✔ 2 urgent jobs started, no backfill start between the first and the last" in printed
    assert "✔ 7 executions, one per job" in printed
    assert "✘" not in printed
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_the_gates_demo_shows_executions_waiting_at_the_gate_with_at_most_max_inside_and_draws_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Five gated executions, MAX 2: each admitted once, at most two inside, the rest waiting; a PNG."""
    plot = tmp_path / "gates.png"
    arguments = [
        "--max",
        "2",
        "--executions",
        "5",
        "--duration",
        "1",
        "--interval",
        "0.3",
        "--timeout",
        "120",
    ]
    assert gates_demo.main([*arguments, "--plot", str(plot)]) == 0
    printed = capsys.readouterr().out
    assert "✔ cap held: at most 2 inside at once ≤ MAX 2" in printed
    assert "✔ 5 admissions, each execution once" in printed
    assert "✔ up to 5 RUNNING at once, those over MAX waiting at the gate" in printed
    assert "✔ 5 of 5 executions succeeded" in printed
    assert "✘" not in printed
    last_tick = [line for line in printed.splitlines() if line.startswith("tick")][-1]
    assert " 0/2  running   0  " in last_tick, "the last tick shows every place freed"
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_the_tenants_demo_shows_quiet_tenants_served_ahead_of_a_backlog_with_fair_share_and_draws_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One noisy tenant, three quiet: with fair share the quiet jobs start ahead of its backlog; a PNG."""
    plot = tmp_path / "tenants.png"
    arguments = ["--max", "2", "--noisy", "8", "--quiet", "3", "--quiet-tick", "2", "--duration", "1"]
    assert tenants_demo.main([*arguments, "--interval", "0.3", "--timeout", "120", "--plot", str(plot)]) == 0
    printed = capsys.readouterr().out
    assert "✔ cap held in both: RUNNING ≤ MAX 2" in printed
    assert "✔ with fair share, 3 quiet jobs started while the noisy tenant started " in printed
    assert "✔ 11 executions in each run, one per job" in printed
    assert "✘" not in printed
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_the_adaptive_demo_cuts_the_limit_on_throttles_and_draws_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """MAX 6 in front of a downstream that takes 2: L is cut below MAX, stays within bounds; a PNG."""
    plot = tmp_path / "adaptive.png"
    arguments = ["--max", "6", "--capacities", "2", "--phase", "5", "--duration", "2", "--jobs", "30"]
    assert adaptive_demo.main([*arguments, "--interval", "0.5", "--plot", str(plot)]) == 0
    printed = capsys.readouterr().out
    assert "✔ cap held: highest RUNNING " in printed
    assert "✔ L was cut below MAX by throttles (lowest " in printed
    assert "✔ L stayed within [1, 6]" in printed
    assert "✘" not in printed
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_the_sizes_demo_keeps_a_large_jobs_room_and_starts_it_and_draws_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """MAX 4 slots kept full by one-slot jobs: a 3-slot job queued behind them starts; the cap holds."""
    plot = tmp_path / "sizes.png"
    arguments = ["--max", "4", "--large", "3", "--duration", "2", "--after", "1", "--seconds", "9"]
    assert sizes_demo.main([*arguments, "--interval", "0.5", "--plot", str(plot)]) == 0
    printed = capsys.readouterr().out
    assert "✔ cap held in slots: most in use " in printed
    assert "✔ the 3-slot job started" in printed
    assert "✘" not in printed
    assert plot.read_bytes().startswith(b"\x89PNG")
