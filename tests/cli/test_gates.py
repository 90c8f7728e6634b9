"""The CLI with a gate: status shows who is inside and who waits; pause, resume and set-max take --gate."""

from __future__ import annotations

import argparse
import io
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from dispatcher.cli.tick import print_tick
from dispatcher.local.account import REGION, pointed_at
from dispatcher.local.emulation import Emulation
from dispatcher.local.gates import create_gate, create_release_queue
from dispatcher.local.stack import create_stack, register_stack
from tests.support.cli_runner import Cli

EXECUTE = True
"""moto runs the gated workflow: each execution sends its request and waits at the gate."""


@dataclass
class Gated:
    """A stack with gate ``crawl`` in pool default (MAX 3), on a workflow whose section lasts a minute."""

    cli: Cli
    gate: dict[str, Any]


@pytest.fixture
def gated(emulated: tuple[str, Emulation]) -> Iterator[Gated]:
    """A stack with a gate, in the emulator, and the CLI pointed at it."""
    endpoint_url, _ = emulated
    name = f"gates-{uuid.uuid4().hex[:8]}"
    boto3.setup_default_session()
    with pointed_at(endpoint_url):
        stack = create_stack(name)
        gate = create_gate(
            name, "crawl", release_queue_url=create_release_queue(name), free_seconds=0, section_seconds=60
        )
        register_stack(name, stack, max_concurrency=3, lanes=json.dumps({"gates": [gate]}))
        yield Gated(Cli(endpoint_url, name, stack), gate)


def _waiting(gated: Gated, count: int) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    deadline = time.monotonic() + 20
    with pointed_at(gated.cli.endpoint_url):
        while True:
            attributes = sqs.get_queue_attributes(
                QueueUrl=gated.gate["queue_url"], AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
            if int(attributes["ApproximateNumberOfMessages"]) >= count:
                return
            assert time.monotonic() < deadline, f"{count} requests never reached the gate"
            time.sleep(0.05)


def test_status_shows_who_is_inside_each_gate_and_who_waits_and_counts_them_in_the_pool(gated: Gated) -> None:
    """Four wait at a gate of pool default (MAX 3); a tick admits three: three inside, one waiting."""
    cli, sfn = gated.cli, boto3.client("stepfunctions", region_name=REGION)
    with pointed_at(cli.endpoint_url):
        for index in range(4):
            sfn.start_execution(stateMachineArn=gated.gate["state_machine_arn"], name=f"w{index}", input="{}")
    _waiting(gated, 4)
    before = json.loads(cli.run("status", "--json").stdout)
    entry = {"name": "crawl", "pool": "default", "paused": False, "max_concurrency": None, "dead_letters": 0}
    entry["settings"] = {}
    assert before["gates"] == [{**entry, "inside": 0, "waiting": 4}]
    assert before["running"] == 0
    ticked = cli.run("tick", "--json")
    assert ticked.returncode == 0, ticked.stderr
    assert json.loads(ticked.stdout)["admitted"] == 3
    after = json.loads(cli.run("status", "--json").stdout)
    assert after["gates"] == [{**entry, "inside": 3, "waiting": 1}]
    assert (after["running"], after["free"]) == (3, 0)
    assert after["pools"][0] == {
        "name": "default",
        "max_concurrency": 3,
        "running": 3,
        "free": 0,
        "paused": False,
        "executions": 3,
    }
    text = cli.run("status").stdout
    row = ["crawl", "default", "-", "no", "3", "1", "0"]
    assert any(line.split() == row for line in text.splitlines()), text
    assert cli.run("tick").stdout == (
        "running 3, started 0, admitted 0, already started 0, dead-lettered 0, released 0,"
        " stopped: capacity\n"
    )


def _tick_line(report: dict[str, Any]) -> str:
    """The line `dispatcher tick` prints for a tick of a dispatcher with gates that said ``report``."""
    out = io.StringIO()
    print_tick(
        argparse.Namespace(json=False), {"running": 0, "stopped": "capacity", "gates": {}, **report}, out
    )
    return out.getvalue()


def test_a_tick_says_what_its_gates_admitted_and_what_they_did_not() -> None:
    """Requests of executions inside already, and refused tokens, are named beside the admissions."""
    assert " admitted 2," in _tick_line({"admitted": 2})
    assert " admitted 1 (2 already inside, 3 refused)," in _tick_line(
        {"admitted": 1, "already_inside": 2, "refused": 3}
    )


def test_a_ticks_line_gives_each_pools_running_and_the_jobs_held_beside_drained() -> None:
    """RUNNING over two pools is said pool by pool; "drained" with held jobs says how many are held."""
    pools = {
        "default": {"max_concurrency": 3, "running": 3, "free": 0},
        "glue": {"max_concurrency": 4, "running": 2, "free": 2},
    }
    line = _tick_line({"running": 5, "pools": pools, "stopped": "drained", "tenants": {"held": 26}})
    assert line.startswith("running 5 (pools: default 3 of 3, glue 2 of 4), started 0,")
    assert line.endswith(" stopped: drained (jobs held for their group's limit: 26)\n")
    alone = _tick_line({"pools": {"default": pools["default"]}, "tenants": {"held": 0}})
    assert alone.startswith("running 0, started 0,")
    assert alone.endswith(" stopped: capacity\n")


def test_pause_resume_and_set_max_take_a_gate_and_change_only_its_keys(gated: Gated) -> None:
    """Pause, resume and set-max take a gate and change only its keys."""
    cli = gated.cli
    paused = cli.run("pause", "--gate", "crawl")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith("gate crawl: paused, MAX from LANES (parameter ")
    assert json.loads(cli.run("status", "--json").stdout)["gates"][0]["paused"] is True
    resized = json.loads(cli.run("set-max", "1", "--gate", "crawl", "--json").stdout)
    assert resized["gates"] == {"crawl": {"max_concurrency": 1, "paused": True}}
    resumed = json.loads(cli.run("resume", "--gate", "crawl", "--json").stdout)
    assert resumed["gates"]["crawl"] == {"max_concurrency": 1, "paused": False}
    assert resumed["max_concurrency"] == 3  # pool default's keys are untouched


def test_an_unknown_gate_is_a_usage_error_naming_the_gates(gated: Gated) -> None:
    """An unknown gate is a usage error naming the gates."""
    result = gated.cli.run("pause", "--gate", "nope")
    assert result.returncode == 2
    assert result.stderr.strip().endswith("--gate nope: no such gate (gates: crawl)")
    assert result.stdout == ""


def test_a_gates_name_given_as_a_lanes_says_it_is_a_gate(gated: Gated) -> None:
    """`enqueue --lane crawl`: a usage error that says crawl is a gate, and which option names it."""
    result = gated.cli.run("enqueue", "{}", "--group", "g", "--lane", "crawl")
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "--lane crawl: crawl is a gate, not a lane (use --gate crawl; lanes: default)"
    )
    assert result.stdout == ""
