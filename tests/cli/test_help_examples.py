"""Every example `--help` prints runs, and every example that filters finds something.

The examples name a stack called ``jobs``, or read the function's variables: here both
point at one emulated stack holding spooled failures (``DownstreamUnavailable``, the
sample workflow's error) and a dead letter. The read-only examples run first, in the
order printed, then the ones that change something (those that filter first, so a
re-run of everything doesn't leave them nothing to find). `status --watch` runs once
(``--count 1``); the `local` examples serve until stopped and are started by test_cli's
and test_docs' tests instead.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path

import boto3
import pytest

from dispatcher import cli as cli_module
from dispatcher.cli.main import COMMAND_GROUPS, parser
from dispatcher.core.events import failure_pattern
from dispatcher.in_process import tick_here
from dispatcher.local.account import FAKE_CREDENTIALS, REGION
from dispatcher.local.emulation import Emulation
from dispatcher.local.events import Rule, to_queue
from dispatcher.local.gates import create_gate, create_release_queue
from dispatcher.local.stack import create_lane, create_stack, function_name, register_stack
from tests.support.cli import fail_jobs
from tests.support.cli_runner import Cli

pytestmark = pytest.mark.no_cover
"""Journeys, not line tests: every example of every `--help` runs the CLI's lines that its focused
tests measure (measured, these added 2 lines of 7,688 to the suite's coverage; CONTRIBUTING,
"The suite's time")."""

EXECUTE = True
STACK = "jobs"
FILTERS = ("--error", "--name", "--status", "--since", "--until")
CHANGES = (
    "pause",
    "resume",
    "set-max",
    "reset-limit",
    "set",
    "unset",
    "forget",
    "enqueue",
    "cancel",
    "tick",
    "redrive-dead-letters",
    "rerun",
)
FOUND_NOTHING = re.compile(r"no spooled failures|\bqueued? 0 |\"total\": 0\b|\"queued\": \[\]")


def examples() -> list[str]:
    """Every example line of `dispatcher --help` and of each command's `--help`, once."""
    root = parser()
    texts = [root.format_help()]
    subcommands = next(action for action in root._actions if action.dest == "command")
    texts += [sub.format_help() for sub in subcommands.choices.values()]  # type: ignore[union-attr]
    found = []
    for text in texts:
        for line in text.split("examples:\n", 1)[-1].splitlines():
            if "dispatcher " in line and not line.lstrip().startswith("dispatcher local"):
                found.append(line.split("  #", 1)[0].strip())
    return list(dict.fromkeys(found))


def command_of(example: str) -> tuple[list[str], str]:
    """``[echo X | ]dispatcher ARGUMENTS[ | jq ...]``: the arguments and standard input."""
    head, piped, _ = example.partition("|")
    if piped and head.strip().startswith("dispatcher "):
        example = head  # its output goes to another program: the dispatcher part is the example
    source, _, command = example.rpartition("|")
    stdin = ""
    if source.strip().startswith("echo "):
        stdin = shlex.split(source)[1] + "\n"
    elif source.strip().startswith("cat "):
        stdin = JOBS
    arguments = shlex.split(command)[1:]
    if "--watch" in arguments:
        arguments += ["--count", "1"]
    return arguments, stdin


JOBS = '{"input": {"order": 44}, "group": "customer-8", "name": "order-44"}\n'


def changes(arguments: list[str]) -> bool:
    """Whether an example's command changes something (it is run against a fresh stack)."""
    name = next(
        argument
        for argument in arguments
        if argument in {*CHANGES, "status", "info", "job", "failed", "dead-letters"}
    )
    return name in CHANGES and "--dry-run" not in arguments


def filters(arguments: list[str]) -> bool:
    """Whether the example narrows the failures it lists or re-runs."""
    return any(argument in FILTERS for argument in arguments)


@pytest.fixture
def world(emulated: tuple[str, Emulation], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Stack ``jobs`` (lanes urgent, backfill, adaptive pools, gate crawl): 2 spooled failures, a dead letter.

    Its variables are set too.
    """
    endpoint_url, emulation = emulated
    for key, value in {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint_url}.items():
        monkeypatch.setenv(key, value)
    boto3.setup_default_session()
    stack = create_stack(STACK, downstream=True, wait_seconds=0)
    releases = create_release_queue(STACK)
    lanes = json.dumps(
        {
            "pools": {
                "glue": {
                    "max_concurrency": 2,
                    "adaptive": {"errors": ["Glue.ConcurrentRunsExceededException"]},
                },
                "default": {"adaptive": {"errors": ["DownstreamUnavailable"], "min": 2}},
            },
            "lanes": [
                create_lane(STACK, "urgent", state_machine_arn=stack.state_machine_arn, priority=10),
                create_lane(STACK, "backfill", wait_seconds=0),
            ],
            "gates": [create_gate(STACK, "crawl", release_queue_url=releases, pool="glue")],
        }
    )
    register_stack(STACK, stack, max_concurrency=3, function=function_name(STACK), lanes=lanes)
    emulation.functions[function_name(STACK)] = lambda _event: tick_here(stack.environment(3), "WARNING")
    emulation.rules.append(
        Rule(failure_pattern(stack.state_machine_arn), to_queue(stack.spool_queue_url, endpoint_url))
    )
    cli = Cli(endpoint_url, STACK, stack)
    fail_jobs(cli, [("order-1", "customer-1"), ("order-2", "customer-2")])
    boto3.client("sqs", region_name=REGION).send_message(
        QueueUrl=stack.queue_url, MessageBody="not json", MessageGroupId="poison", MessageDeduplicationId="p"
    )
    assert cli.tick_in_process()["dead_lettered"] == 1
    for key, value in stack.environment(3).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SPOOL_QUEUE_URL", stack.spool_queue_url)
    monkeypatch.setenv("LANES", lanes)
    (tmp_path / "jobs.jsonl").write_text(JOBS)
    monkeypatch.chdir(tmp_path)
    return cli


def test_the_examples_are_the_ones_printed() -> None:
    """Each command group's examples are found (so the test below can't pass on none)."""
    found = examples()
    assert len(found) >= 20
    assert any("--error 'Downstream*'" in example for example in found)
    assert len(COMMAND_GROUPS) == 10


def test_every_help_example_runs_and_every_filter_finds_something(
    world: Cli, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit status 0 for each; an example with a filter lists or queues at least one failure."""
    found = [command_of(example) for example in examples()]
    changing = sorted((item for item in found if changes(item[0])), key=lambda item: not filters(item[0]))
    ordered = [item for item in found if not changes(item[0])] + changing
    for arguments, stdin in ordered:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        status = cli_module.main(arguments)
        printed = capsys.readouterr()
        assert (arguments, status, printed.err if status else "") == (arguments, 0, "")
        if filters(arguments):
            assert not FOUND_NOTHING.search(printed.out), (arguments, printed.out)
            if "--json" in arguments:
                assert json.loads(printed.out)
