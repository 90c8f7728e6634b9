"""`dispatcher local` with gates: the sample gated workflow, `gated N [--group G]`, `gated` interrupted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from dispatcher.local import helpers as emulator_helpers
from dispatcher.local.account import pointed_at
from dispatcher.local.members import local_members
from dispatcher.local.stack import create_stack, register_stack
from tests.support.cli_runner import Cli
from tests.support.served import served


def test_cli_local_with_a_gate_runs_the_sample_gated_workflow_through_it(cli: Cli) -> None:
    """`--gate`: gated executions wait at gate ``gate``; a tick admits MAX of them; status shows both."""
    arguments = ("--stack", "gated", "--schedule", "0", "--wait-seconds", "600", "--max", "2")
    with served(cli, *arguments, "--gate") as local:
        assert "; gate gate (pool default, guarding the section of gated-gate-gated)." in local.first
        env = local.env
        started = subprocess.run(
            [sys.executable, "-m", "dispatcher.local", "gated", "3", "--stack", "gated", "--gate", "gate"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert started.stdout == "started 3 execution(s) of gated-gate-gated: each asked at the gate\n"

        def gate() -> dict[str, Any]:
            status = json.loads(cli.run("--stack", "gated", "status", "--json", stack=False, env=env).stdout)
            return dict(status["gates"][0])

        # It returned once every request was on the gate's queue.
        assert gate()["waiting"] == 3
        report = json.loads(
            cli.run("--stack", "gated", "tick", "--invoke", "--json", stack=False, env=env).stdout
        )
        assert report["admitted"] == 2
        assert gate() == {
            "name": "gate",
            "pool": "default",
            "inside": 2,
            "waiting": 1,
            "paused": False,
            "max_concurrency": None,
            "dead_letters": 0,
            "settings": {},
        }


def test_a_gated_execution_on_a_quiet_emulator_is_admitted_on_its_wake(cli: Cli) -> None:
    """Ticking once an hour, the sample gated workflow's wake (just before its request) brings the tick."""
    arguments = ("--stack", "gwoken", "--schedule", "3600", "--wait-seconds", "600", "--max", "2")
    with served(cli, *arguments, "--gate") as local:
        started = subprocess.run(
            [sys.executable, "-m", "dispatcher.local", "gated", "1", "--stack", "gwoken", "--gate", "gate"],
            capture_output=True,
            text=True,
            env=local.env,
            timeout=60,
            check=False,
        )
        assert started.returncode == 0, started.stderr
        assert "admitted 1" in local.next_line("tick: ")


def test_gated_with_a_group_tries_a_gates_limit_per_group(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gated 3 --group t`, `gated 2`: gate crawl (max_per_group 1, MAX 5) admits one of t and both others."""
    lanes = tmp_path / "lanes.json"
    lanes.write_text(json.dumps({"gates": [{"name": "crawl", "max_per_group": 1}]}))
    arguments = ("--stack", "grouped", "--schedule", "0", "--wait-seconds", "600", "--max", "5")
    with served(cli, *arguments, "--lanes", str(lanes)) as local:
        assert "guarding the section of grouped-crawl-gated, max_per_group 1)." in local.first
        for key, value in local.exports.items():
            monkeypatch.setenv(key, value)
        boto3.setup_default_session()
        try:
            assert (
                emulator_helpers.main(["gated", "3", "--stack", "grouped", "--gate", "crawl", "--group", "t"])
                == 0
            )
            assert emulator_helpers.main(["gated", "2", "--stack", "grouped", "--gate", "crawl"]) == 0
        finally:
            boto3.setup_default_session()
        said = capsys.readouterr().out.splitlines()
        assert said[0] == "started 3 execution(s) of grouped-crawl-gated in group t: each asked at the gate"
        assert said[1] == "started 2 execution(s) of grouped-crawl-gated: each asked at the gate"
        ticked = cli.run("--stack", "grouped", "tick", "--invoke", "--json", stack=False, env=local.env)
        assert json.loads(ticked.stdout)["admitted"] == 3, ticked
        status = cli.run("--stack", "grouped", "status", "--groups", "--json", stack=False, env=local.env)
        groups = json.loads(status.stdout)["groups"]
        assert [(each["group"], each["running"]) for each in groups if each["group"] == "t"] == [("t", 1)]


def test_gated_interrupted_says_how_many_it_started_without_a_traceback(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while `gated 5` starts its executions: exit 130 and one line with the count started."""
    name = f"gated-{cli.stack_name}"
    with pointed_at(cli.endpoint_url):
        stack = create_stack(name)
        members = local_members(stack, cli.endpoint_url, wait_seconds=600, gate=True)
        register_stack(name, stack, 3, lanes=members.lanes_variable)
        boto3.setup_default_session()
        calls = {"made": 0}

        def ctrl_c_on_the_third(**_: Any) -> None:
            calls["made"] += 1
            if calls["made"] == 3:
                raise KeyboardInterrupt

        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register("before-call.sfn.StartExecution", ctrl_c_on_the_third)
        try:
            status = emulator_helpers.main(["gated", "5", "--stack", name])
        finally:
            boto3.setup_default_session()
    assert status == 130
    assert capsys.readouterr().err == (
        f"interrupted: 2 of 5 execution(s) of {name}-gate-gated started; they run on, and ask at the gate\n"
    )
