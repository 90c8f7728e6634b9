"""`dispatcher` commands, run as a user runs them, with assertions on output and exit status."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from typing import Any

import pytest

from dispatcher import cli as cli_module
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.cli import tick as tick_command
from dispatcher.local.emulation import Emulation
from tests.support.cli_runner import Cli

COMMANDS = [
    "status",
    "info",
    "pause",
    "resume",
    "set-max",
    "enqueue",
    "tick",
    "local",
    "failed",
    "rerun",
    "dead-letters",
    "redrive-dead-letters",
]


def _control(aws: dict[str, Any], cli: Cli) -> dict[str, Any]:
    value = aws["ssm"].get_parameter(Name=cli.stack.control_parameter)["Parameter"]["Value"]
    return dict(json.loads(value))


def _start(aws: dict[str, Any], cli: Cli, name: str) -> None:
    aws["stepfunctions"].start_execution(stateMachineArn=cli.stack.state_machine_arn, name=name, input="{}")


def test_cli_help_lists_every_command_with_examples(cli: Cli) -> None:
    """`--help` of the installed script names each command and shows examples and the exit statuses."""
    result = cli.spawn("--help", stack=False)
    assert result.returncode == 0
    for command in COMMANDS:
        assert command in result.stdout
    assert "examples:" in result.stdout
    assert "exit status: 0 success, 1 failure, 2 usage error" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_cli_every_command_has_help_with_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each command's `--help` has examples to copy (the parser in-process: the script's is tested above)."""
    with pytest.raises(SystemExit) as exit_status:
        cli_module.main([command, "--help"])
    assert exit_status.value.code == 0
    printed = capsys.readouterr().out
    assert "examples:" in printed
    assert f"dispatcher {command}" in printed or f"{command} " in printed


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((), "the following arguments are required: COMMAND"),
        (("launch",), "invalid choice: 'launch'"),
        (("set-max", "-1"), "argument N"),
        (("set-max", "ten"), "MAX must be an integer >= 0"),
        (("status", "--watch", "0"), "seconds must be > 0"),
    ],
    ids=["no-command", "unknown-command", "negative-max", "word-max", "zero-watch"],
)
def test_cli_usage_error_is_one_line_and_exit_2(cli: Cli, arguments: tuple[str, ...], message: str) -> None:
    """A usage error: exit status 2 and one line on stderr that says what is wrong."""
    result = cli.run(*arguments, stack=False)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr


def test_cli_status_table_counts_every_column(cli: Cli, aws: dict[str, Any]) -> None:
    """The table shows MAX, paused, RUNNING, free, queued, in flight and dead letters as they are."""
    _start(aws, cli, "running-1")
    _start(aws, cli, "running-2")
    for job in range(4):
        cli.run("enqueue", json.dumps({"job": job}), "--group", f"g{job}")
    aws["sqs"].receive_message(QueueUrl=cli.stack.queue_url, MaxNumberOfMessages=1)
    aws["sqs"].send_message(
        QueueUrl=cli.stack.dead_letter_queue_url,
        MessageBody="x",
        MessageGroupId="g",
        MessageDeduplicationId="d",
    )
    result = cli.run("status")
    assert result.returncode == 0
    header, row = result.stdout.strip().splitlines()
    assert header.split() == [
        "MAX",
        "PAUSED",
        "RUNNING",
        "FREE",
        "QUEUED",
        "IN",
        "FLIGHT",
        "DEAD",
        "LETTERS",
        "OLDEST",
        "RUNNING",
    ]
    maximum, paused, running, free, queued, in_flight, dead, oldest = row.split()
    assert (maximum, paused, running, free) == ("3", "no", "2", "1")
    assert (queued, in_flight, dead) == ("3", "1", "1")
    assert oldest.endswith("s")


def test_cli_info_shows_what_a_producer_needs_first_and_every_output(cli: Cli) -> None:
    """`--stack NAME info`: the job queue first, then the other outputs; `--json` has them all by key."""
    result = cli.run("info")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"stack {cli.stack_name} in us-east-1 (CREATE_COMPLETE)"
    assert lines[1].split() == ["JobQueueUrl", cli.stack.queue_url]
    assert ["StateMachineArn", cli.stack.state_machine_arn] in [line.split() for line in lines]
    assert lines[-1] == "Producers send jobs to JobQueueUrl (docs/producers.md)."
    document = json.loads(cli.run("info", "--json").stdout)
    assert document["outputs"]["JobQueueUrl"] == cli.stack.queue_url
    assert document["parameters"] == {"MaxConcurrency": "3", "Lanes": ""}
    assert (document["stack"], document["region"]) == (cli.stack_name, "us-east-1")
    without = cli.run("info", stack=False)
    assert (without.returncode, without.stderr) == (
        2,
        "dispatcher: error: info describes a deployed stack:"
        " give --stack NAME (the name `sam deploy` used)\n",
    )


def test_cli_version_names_the_distribution(cli: Cli) -> None:
    """`dispatcher --version` prints the version and the distribution it belongs to (exit 0)."""
    result = cli.spawn("--version", stack=False)
    assert result.returncode == 0
    assert re.fullmatch(r"dispatcher \d+\.\d+\.\d+\S* \(stepfunctions-dispatcher\)\n", result.stdout)


def test_cli_status_json_has_the_contract_keys(cli: Cli, aws: dict[str, Any]) -> None:
    """`status --json` is one JSON object with the documented keys and types."""
    _start(aws, cli, "one")
    result = cli.run("status", "--json")
    assert result.returncode == 0
    [line] = result.stdout.splitlines()
    status = json.loads(line)
    for key in ("max_concurrency", "running", "free", "queued", "in_flight", "dead_letters"):
        assert type(status[key]) is int, key
    assert status["paused"] is False
    assert (status["max_concurrency"], status["running"], status["free"]) == (3, 1, 2)
    assert status["oldest_running_seconds"] >= 0


def test_a_redriven_execution_is_as_old_as_its_redrive(cli: Cli, aws: dict[str, Any]) -> None:
    """OLDEST RUNNING (and the tick's OldestRunningAge) count from the last (re)start, not the first."""
    _start(aws, cli, "old")
    arn = f"{cli.stack.state_machine_arn.replace(':stateMachine:', ':execution:')}:old"
    time.sleep(3.0)
    aws["stepfunctions"].stop_execution(executionArn=arn)
    redriven_at = time.time()
    aws["stepfunctions"].redrive_execution(executionArn=arn)
    machine = StateMachine(aws["stepfunctions"], cli.stack.state_machine_arn)
    listing = machine.list_running(None, {}, time.time())
    assert listing.oldest_started_at is not None
    assert listing.oldest_started_at >= redriven_at - 0.5
    result = cli.run("status", "--json")
    assert result.returncode == 0, result.stderr
    # Counted from the first start it would be at least 3 s more than the time since the redrive.
    assert json.loads(result.stdout)["oldest_running_seconds"] <= time.time() - redriven_at + 0.5


def test_cli_status_watch_refreshes_until_count(cli: Cli) -> None:
    """`--watch` prints a fresh reading every interval (`--count` stops it for scripts)."""
    result = cli.run("status", "--watch", "0.2", "--count", "3", "--json")
    assert result.returncode == 0
    assert [json.loads(line)["max_concurrency"] for line in result.stdout.splitlines()] == [3] * 3


def test_cli_pause_set_max_resume_change_only_their_own_key(cli: Cli, aws: dict[str, Any]) -> None:
    """pause, set-max and resume read, modify and write: set-max while paused stays paused."""
    assert cli.run("pause").returncode == 0
    assert _control(aws, cli) == {"max_concurrency": 3, "paused": True}
    result = cli.run("set-max", "7", "--json")
    assert json.loads(result.stdout) == {
        "parameter": cli.stack.control_parameter,
        "max_concurrency": 7,
        "paused": True,
    }
    status = json.loads(cli.run("status", "--json").stdout)
    assert (status["paused"], status["free"], status["max_concurrency"]) == (True, 0, 7)
    result = cli.run("resume")
    assert result.returncode == 0
    assert "running, MAX 7" in result.stdout
    assert _control(aws, cli) == {"max_concurrency": 7, "paused": False}


def test_cli_max_0_reads_as_paused_everywhere(cli: Cli) -> None:
    """MAX 0 starts nothing: `set-max 0` says paused, in text and JSON, as `status` does."""
    result = cli.run("set-max", "0")
    assert result.returncode == 0
    assert result.stdout.startswith("paused, MAX 0 (parameter ")
    assert json.loads(cli.run("resume", "--json").stdout)["paused"] is True
    status = json.loads(cli.run("status", "--json").stdout)
    assert (status["paused"], status["max_concurrency"], status["free"]) == (True, 0, 0)
    assert cli.run("set-max", "2").stdout.startswith("running, MAX 2 (parameter ")


def test_cli_paused_tick_starts_nothing_and_resume_starts(cli: Cli, aws: dict[str, Any]) -> None:
    """A tick run by the CLI honours the pause, then starts once resumed."""
    cli.run("enqueue", "{}", "--group", "g")
    cli.run("pause")
    paused = json.loads(cli.run("tick", "--json").stdout)
    assert (paused["started"], paused["stopped"]) == (0, "paused")
    assert cli.run("tick").stdout == "stopped: paused (paused, or MAX 0); nothing counted or started\n"
    cli.run("resume")
    result = cli.run("tick")
    assert result.returncode == 0
    assert "started 1" in result.stdout
    running = aws["stepfunctions"].list_executions(
        stateMachineArn=cli.stack.state_machine_arn, statusFilter="RUNNING"
    )["executions"]
    assert len(running) == 1


def test_cli_tick_keeps_to_max(cli: Cli) -> None:
    """`tick` runs the real handler here: at MAX 3 with 5 jobs it starts 3."""
    for job in range(5):
        cli.run("enqueue", json.dumps({"job": job}), "--group", f"g{job}")
    report = json.loads(cli.spawn("tick", "--json").stdout)  # the function, run by the installed script
    assert (report["running"], report["started"], report["stopped"]) == (0, 3, "capacity")


def test_cli_tick_invoke_of_a_missing_function_fails_in_one_line(cli: Cli) -> None:
    """`tick --invoke` reports Lambda's refusal as one line and exit status 1."""
    result = cli.run("tick", "--invoke", "--function-name", "no-such-function")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Invoke failed: ResourceNotFoundException" in result.stderr


def test_cli_tick_invoke_reports_a_function_error_in_one_line(
    cli: Cli, emulated: tuple[str, Emulation]
) -> None:
    """A tick that raised in the function: Lambda's errorMessage, one line, exit status 1."""

    def broken(_event: object) -> object:
        raise RuntimeError("CONTROL_PARAMETER /x: not valid JSON")

    emulated[1].functions["broken-tick"] = broken
    try:
        result = cli.run("tick", "--invoke", "--function-name", "broken-tick")
    finally:
        del emulated[1].functions["broken-tick"]
    assert result.returncode == 1
    assert result.stderr == (
        "dispatcher: error: the tick failed in broken-tick: CONTROL_PARAMETER /x: not valid JSON\n"
    )


def test_cli_tick_invoke_of_a_function_that_is_not_the_dispatcher(
    cli: Cli, emulated: tuple[str, Emulation]
) -> None:
    """A function that answers something other than a tick report: named, with what it said."""
    emulated[1].functions["hello"] = lambda _event: "hello world"
    try:
        result = cli.run(
            "tick", "--invoke", "--function-name", "arn:aws:lambda:us-east-1:123456789012:function:hello"
        )
    finally:
        del emulated[1].functions["hello"]
    assert result.returncode == 1
    assert "returned '\"hello world\"', not a tick report" in result.stderr


def test_cli_tick_invoke_without_a_function_says_where_to_set_it(cli: Cli) -> None:
    """The emulated stack has no function output: the error names the output to look for."""
    result = cli.run("tick", "--invoke")
    assert result.returncode == 1
    assert "DispatcherFunctionName" in result.stderr


def test_cli_configuration_from_the_function_environment(cli: Cli) -> None:
    """Without --stack, the function's own variables configure every command."""
    env = cli.environment(
        **cli.stack.environment(4),
    )
    result = cli.spawn("status", "--json", stack=False, env=env)
    assert result.returncode == 0
    # The control parameter (3) wins over MAX_CONCURRENCY (4), as in a tick.
    assert json.loads(result.stdout)["max_concurrency"] == 3


def test_cli_missing_configuration_names_every_variable(cli: Cli) -> None:
    """No --stack and no variables: one line naming everything to set, exit status 2 (a usage error)."""
    result = cli.run("status", stack=False)
    assert result.returncode == 2
    assert result.stderr == (
        "dispatcher: error: not configured: set QUEUE_URL, DEAD_LETTER_QUEUE_URL, STATE_MACHINE_ARN,"
        " MAX_CONCURRENCY (or use --stack NAME)\n"
    )
    result = cli.run("status", stack=False, env=cli.environment(MAX_CONCURRENCY="3"))
    assert result.returncode == 2
    assert "set QUEUE_URL, DEAD_LETTER_QUEUE_URL, STATE_MACHINE_ARN (or" in result.stderr


def test_cli_unknown_stack_is_one_line(cli: Cli) -> None:
    """A stack that doesn't exist: exit status 1, one line naming it."""
    result = cli.run("--stack", "no-such-stack", "status", stack=False)
    assert result.returncode == 1
    assert result.stderr.strip().startswith("dispatcher: error: stack no-such-stack not found")


def test_cli_unreachable_endpoint_is_one_line(cli: Cli) -> None:
    """An emulator that isn't running: exit status 1 and the endpoint named, no traceback."""
    result = cli.run("status", "--endpoint-url", "http://127.0.0.1:9")
    assert result.returncode == 1
    assert "http://127.0.0.1:9" in result.stderr


def test_cli_pause_creates_a_missing_parameter_with_its_key_alone(cli: Cli, aws: dict[str, Any]) -> None:
    """No parameter yet: `pause` writes only `paused`, and MAX still comes from the stack."""
    aws["ssm"].delete_parameter(Name=cli.stack.control_parameter)
    result = cli.run("pause")
    assert result.returncode == 0
    assert "paused, MAX from the environment" in result.stdout
    assert _control(aws, cli) == {"paused": True}
    status = json.loads(cli.run("status", "--json").stdout)
    assert (status["max_concurrency"], status["paused"], status["max_from"]) == (3, True, "environment")


@pytest.mark.parametrize("presses", [1, 2])
def test_cli_tick_ctrl_c_lets_the_tick_end_and_says_what_it_did(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, presses: int
) -> None:
    """One Ctrl-C during a tick: it ends, its line is printed, exit 130; a second stops it at once."""
    for job in range(2):
        cli.run("enqueue", json.dumps({"job": job}), "--group", f"g{job}")
    real = tick_command._tick_here

    def pressed(*arguments: Any) -> dict[str, Any]:
        for _ in range(presses):
            os.kill(os.getpid(), signal.SIGINT)
        return real(*arguments)

    monkeypatch.setattr(tick_command, "_tick_here", pressed)
    result = cli.run("tick")
    assert result.returncode == 130
    if presses == 1:
        assert result.stdout.startswith("running 0, started 2,")
        assert result.stderr == (
            "dispatcher: interrupted: the tick above ran to its end first"
            " (a second Ctrl-C stops one at once)\n"
        )
    else:
        assert result.stdout == ""
        assert result.stderr == f"dispatcher: interrupted: {tick_command.STOPPED_PART_WAY}\n"
