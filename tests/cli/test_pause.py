"""`dispatcher pause --wait`: it returns once no tick can start anything more, not at once."""

from __future__ import annotations

import contextlib
import subprocess
import threading
from typing import Any

import boto3

from tests.support.cli_runner import SCRIPT, Cli


def test_pause_wait_returns_only_once_the_tick_in_flight_has_ended_and_then_nothing_starts(cli: Cli) -> None:
    """A tick in flight (held at its StartExecution) may start what it received; `--wait` outlasts it.

    `pause --wait` runs in a process of its own: the tick in flight runs in this one.
    """
    assert cli.run("enqueue", "{}", "--group", "a", "--name", "in-flight").returncode == 0
    reached, go_on = threading.Event(), threading.Event()

    def hold(**_: Any) -> None:
        reached.set()
        assert go_on.wait(60), "the test never let the tick go on"

    session = boto3.DEFAULT_SESSION
    assert session is not None
    session.events.register("before-call.states.StartExecution", hold)
    ticked: list[dict[str, Any]] = []
    tick = threading.Thread(target=lambda: ticked.append(cli.tick_in_process()))
    tick.start()
    pause = None
    try:
        assert reached.wait(60), "the tick never reached its StartExecution"
        pause = subprocess.Popen(
            [str(SCRIPT), "--stack", cli.stack_name, "pause", "--wait"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli.environment(),
        )
        # Past the 5 s every tick takes to see it: only the tick in flight holds it up now.
        with contextlib.suppress(subprocess.TimeoutExpired):
            pause.wait(timeout=7)
        assert pause.poll() is None, "pause --wait returned while a tick could still start a job"
    finally:
        go_on.set()
        tick.join(timeout=60)
        session.events.unregister("before-call.states.StartExecution", hold)
    assert pause is not None
    out, errors = pause.communicate(timeout=60)
    assert (pause.returncode, out.splitlines()[-1]) == (0, "  no tick starts anything more")
    assert errors.startswith("waiting for every tick to see the pause (5 s)")
    assert ticked[0]["started"] == 1, "the tick in flight started what it had received"
    cli.run("enqueue", "{}", "--group", "b", "--name", "after")
    assert cli.tick_in_process()["started"] == 0
