"""`dispatcher local`: the emulator as a user starts it, and what it says when it can't start."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from dispatcher import cli as cli_module
from dispatcher.cli import local as local_command
from dispatcher.core.errors import ConfigurationError
from dispatcher.local import command as emulator_command
from dispatcher.local import helpers as emulator_helpers
from dispatcher.local.account import environment, pointed_at
from dispatcher.local.members import local_members
from tests.support.cli_runner import Cli
from tests.support.served import served


def test_cli_local_without_the_emulator_installed_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Installed without the `local` extra, `dispatcher local` names the extra to install (exit 1)."""
    monkeypatch.setattr(local_command, "LOCAL_MODULES", ("moto", "no_such_module_here"))
    assert cli_module.main(["local", "--port", "0"]) == 1
    assert capsys.readouterr().err == (
        "dispatcher: error: `dispatcher local` needs the emulator (no_such_module_here missing):"
        " pip install 'stepfunctions-dispatcher[local]'"
        " (in a clone of the repository: pip install '.[local]')\n"
    )


def test_cli_local_serves_a_stack_every_command_can_use(cli: Cli) -> None:
    """`dispatcher local` prints the exports and a stack name; `status` works against them; Ctrl-C exits 0."""
    # Executions that outlast the test: the second tick counts one, however slow the machine.
    with served(cli, "--stack", "try-it", "--schedule", "0", "--wait-seconds", "600") as local:
        assert local.first.startswith("Emulator ready at http://127.0.0.1:")
        assert local.exports["AWS_ENDPOINT_URL"] in local.first
        env = local.env
        result = cli.run("--stack", "try-it", "status", "--json", stack=False, env=env)
        assert result.returncode == 0
        assert json.loads(result.stdout)["max_concurrency"] == 5
        cli.run("--stack", "try-it", "enqueue", '{"job": 1}', "--group", "g", stack=False, env=env)
        # The stack names its emulated function: the tick runs in the `local` process.
        invoked = cli.run("--stack", "try-it", "tick", "--invoke", "--json", stack=False, env=env)
        assert invoked.returncode == 0, invoked.stderr
        report = json.loads(invoked.stdout)
        assert (report["running"], report["started"], report["stopped"]) == (0, 1, "drained")
        again = cli.run("--stack", "try-it", "tick", "--invoke", stack=False, env=env)
        assert again.stdout.startswith("running 1, started 0,")


def test_a_broken_control_parameter_stops_the_ticks_not_the_emulator_and_mending_it_resumes_them(
    cli: Cli,
) -> None:
    """A typo in the parameter: each tick fails as the function's would, status shows it, `unset` mends it."""
    with served(cli, "--stack", "mended", "--schedule", "0.5", "--wait-seconds", "600") as local:
        env = local.env
        with pointed_at(local.exports["AWS_ENDPOINT_URL"]):
            boto3.client("ssm").put_parameter(
                Name="/mended/dispatcher/control",
                Value=json.dumps({"lanes": {"default": {"max_per_group": 0}}}),
                Type="String",
                Overwrite=True,
            )
        failed = local.next_line("tick failed")
        assert failed.endswith(
            "tick failed (the next one comes as scheduled): control parameter /mended/dispatcher/control"
            " is malformed: lanes.default.max_per_group: Input should be greater than or equal to 1;"
            " mend it: dispatcher unset --lane default max_per_group\n"
        )
        status = cli.run("--stack", "mended", "status", stack=False, env=env)
        assert (status.returncode, status.stdout.splitlines()[0]) == (
            0,
            "CONTROL PARAMETER BROKEN: every tick stops (nothing is received) until it is mended.",
        )
        cli.run("--stack", "mended", "enqueue", "{}", "--group", "g", stack=False, env=env)
        local.next_line("tick failed")  # the job waits on the queue meanwhile
        advised = failed.rstrip().split("; mend it: dispatcher ")[1].split()
        mended = cli.run("--stack", "mended", *advised, stack=False, env=env)
        assert mended.returncode == 0, mended.stderr
        assert "started 1" in local.next_line("tick: ")
        assert local.process.poll() is None


def test_a_port_whose_last_connections_wait_in_time_wait_is_free() -> None:
    """A stopped emulator's connections in TIME_WAIT don't hold its port: `make local` restarts at once."""
    listener = socket.socket()
    # As werkzeug's server does (socketserver's allow_reuse_address): the connections it
    # accepts inherit the option, and the server binds again over their TIME_WAIT.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the server closes first: its end of the connection waits in TIME_WAIT
    client.close()
    listener.close()
    with socket.socket() as plain, pytest.raises(OSError, match="in use"):
        plain.bind(("127.0.0.1", port))  # the port really is held by the TIME_WAIT
    assert emulator_command._port_free(port)


def test_settle_returns_once_executions_ended_and_gives_up_at_its_timeout(
    cli: Cli, aws: dict[str, Any]
) -> None:
    """`settle` exits 1 while one runs (at its timeout), 0 once it ended and its event was delivered.

    ``--stack``: only this test's stack counts; other tests in this process share moto's
    backend and may leave executions of their own stacks running.
    """
    sfn = aws["stepfunctions"]
    started = sfn.start_execution(stateMachineArn=cli.stack.state_machine_arn, name="slow")
    other = sfn.create_state_machine(
        name=f"{cli.stack_name}-other",
        definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/other",
    )["stateMachineArn"]
    elsewhere = sfn.start_execution(stateMachineArn=other, name="elsewhere")["executionArn"]
    waiting, settled, everything = io.StringIO(), io.StringIO(), io.StringIO()
    try:
        with environment({"AWS_ENDPOINT_URL": cli.endpoint_url}):
            assert emulator_helpers.settle(["--stack", cli.stack_name, "--timeout", "0.3"], waiting) == 1
            sfn.stop_execution(executionArn=started["executionArn"])
            assert emulator_helpers.settle(["--stack", cli.stack_name, "--timeout", "60"], settled) == 0
            # Without --stack every execution counts: the other state machine's still runs.
            assert emulator_helpers.settle(["--timeout", "0.3"], everything) == 1
    finally:
        sfn.stop_execution(executionArn=elsewhere)
    assert waiting.getvalue() == "not settled after 0.3 s: 1 execution(s) still run\n"
    assert settled.getvalue() == "settled: no execution runs, and every status change event is delivered\n"
    assert everything.getvalue().startswith("not settled after 0.3 s: ")
    # Settled means delivered: the failure spool already holds the ABORTED execution's event.
    [spooled] = aws["sqs"].receive_message(QueueUrl=cli.stack.spool_queue_url)["Messages"]
    assert json.loads(spooled["Body"])["detail"]["status"] == "ABORTED"


def test_cli_local_with_a_lane_serves_two_lanes_into_one_pool(cli: Cli) -> None:
    """`--lane urgent=10`: status shows both lanes; a job on the urgent lane starts first, under one MAX."""
    arguments = ("--stack", "laned", "--schedule", "0", "--wait-seconds", "600", "--max", "1")
    with served(cli, *arguments, "--lane", "urgent=10") as local:
        assert "; lane urgent (priority 10, pool default, state machine laned-workflow)." in local.first, (
            local.first
        )
        env = local.env
        status = json.loads(cli.run("--stack", "laned", "status", "--json", stack=False, env=env).stdout)
        assert [(lane["name"], lane["priority"]) for lane in status["lanes"]] == [
            ("default", 0),
            ("urgent", 10),
        ]
        cli.run("--stack", "laned", "enqueue", '{"job": "backfill"}', "--group", "g", stack=False, env=env)
        cli.run(
            "--stack",
            "laned",
            "enqueue",
            '{"job": "urgent"}',
            "--group",
            "g",
            "--lane",
            "urgent",
            stack=False,
            env=env,
        )
        report = json.loads(
            cli.run("--stack", "laned", "tick", "--invoke", "--json", stack=False, env=env).stdout
        )
        assert report["started"] == 1
        assert report["lanes"]["urgent"]["started"] == 1, "the urgent lane's job takes the one slot"
        status = json.loads(cli.run("--stack", "laned", "status", "--json", stack=False, env=env).stdout)
        assert [(lane["name"], lane["queued"]) for lane in status["lanes"]] == [("default", 1), ("urgent", 0)]


def test_cli_local_refuses_a_lane_option_it_cannot_read(cli: Cli) -> None:
    """CLI local refuses a lane option it cannot read."""
    result = cli.run("local", "--lane", "default=3", stack=False)
    assert result.returncode == 2
    assert "NAME[=PRIORITY]" in result.stderr
    result = cli.run("local", "--lane", "urgent=high", stack=False)
    assert result.returncode == 2
    assert "PRIORITY must be an integer" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--lane", "urgent", "--lane", "urgent=2"],
            "dispatcher local: error: argument --lane: lane urgent is given twice",
        ),
        (["--gate", "--lane", "gate"], "dispatcher: error: --lane gate: --gate's gate is called gate"),
        (["--lanes", "no-such.json"], "dispatcher: error: --lanes: cannot read no-such.json: No such file"),
        (["--lanes", "list.json"], "dispatcher: error: --lanes list.json: LANES: must be a JSON object"),
        (
            ["--lanes", "standard.json"],
            "dispatcher: error: --lanes standard.json: LANES: lanes[0].queue_url: http://127.0.0.1:",
        ),
        (
            ["--lanes", "list.json", "--lane", "urgent"],
            "dispatcher local: error: argument --lane: not allowed with argument --lanes",
        ),
    ],
    ids=["repeated-lane", "lane-named-gate", "missing-file", "not-an-object", "standard-queue", "both"],
)
def test_cli_local_refuses_lanes_it_cannot_serve_before_it_says_it_is_ready(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    arguments: list[str],
    message: str,
) -> None:
    """A repeated lane, a lane named as the gate, a file that is no LANES: exit 2, one line, no banner."""
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "standard.json").write_text(
        json.dumps({"lanes": [{"name": "u", "queue_url": "http://q/jobs"}]})
    )
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    try:
        status = cli_module.main(["local", "--port", "0", *arguments], out=out)
    except SystemExit as exit_status:  # argparse's own usage errors
        status = int(exit_status.code or 0)
    errors = capsys.readouterr().err
    assert (status, out.getvalue()) == (2, "")
    assert len(errors.splitlines()) == 1, errors
    assert errors.startswith(message), errors


def test_a_field_error_in_a_lanes_file_is_said_before_the_emulator_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A group limit of 0 or a name for an ARN: one line naming the field, exit 2, and no emulator at all."""

    def never(**_: Any) -> int:
        raise AssertionError("the emulator started")

    monkeypatch.setattr(emulator_command, "serve", never)
    monkeypatch.chdir(tmp_path)
    problems = {
        "zero.json": ({"lanes": [{"name": "t", "max_per_group": 0}]}, "LANES: lanes[0].max_per_group: input"),
        "arn.json": (
            {"gates": [{"name": "g", "state_machine_arn": "crawler"}]},
            "LANES: gates[0].state_machine_arn:",
        ),
    }
    for file, (document, message) in problems.items():
        (tmp_path / file).write_text(json.dumps(document))
        assert cli_module.main(["local", "--lanes", file], out=io.StringIO()) == 2
        assert capsys.readouterr().err.startswith(f"dispatcher: error: --lanes {file}: {message}")


WAITS_FOR_CTRL_C = """
import io, signal, sys, threading, time
from dispatcher.local import command

def elsewhere():
    time.sleep(0.5)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # delivered to this thread, not the main one

threading.Thread(target=elsewhere, daemon=True).start()
try:
    command._tick_on_schedule(lambda: {}, float(sys.argv[1]), command.TickLines(io.StringIO()))
except KeyboardInterrupt:
    print("stopped")
"""


@pytest.mark.parametrize("schedule", [0.0, 600.0])
def test_ctrl_c_delivered_to_another_thread_stops_the_emulator_between_ticks(schedule: float) -> None:
    """A signal another thread (one of moto's) takes: the main thread still sees it within WAKE_SECONDS."""
    done = subprocess.run(
        [sys.executable, "-c", WAITS_FOR_CTRL_C, str(schedule)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.strip() == "stopped", done.stderr


def test_a_lanes_file_has_what_it_names_created_and_checked_as_the_function_checks_it(
    cli: Cli, aws: dict[str, Any]
) -> None:
    """Queues and state machines by the names the file gives (or defaults); a lane and gate of one machine."""
    document = {
        "pools": {"glue": {"max_concurrency": 2}},
        "lanes": [
            {
                "name": "reports",
                "queue_url": "https://sqs.eu-west-1.amazonaws.com/210987654321/reports.fifo",
                "dead_letter_queue_url": "https://sqs.eu-west-1.amazonaws.com/210987654321/reports-dlq.fifo",
                "state_machine_arn": "arn:aws:states:eu-west-1:210987654321:stateMachine:reports",
                "max_concurrency": 1,
                "starts_per_second": 0.5,
            },
            {"name": "ingest", "pool": "glue", "state_machine_arn": arn("ingest")},
            {"name": "urgent", "priority": 10, "state_machine_arn": cli.stack.state_machine_arn},
        ],
        "gates": [{"name": "crawl", "pool": "glue", "state_machine_arn": arn("crawler")}],
    }
    with pointed_at(cli.endpoint_url):
        members = local_members(cli.stack, cli.endpoint_url, wait_seconds=1, document=document)
    lanes = {lane["name"]: lane for lane in members.document["lanes"]}
    assert lanes["reports"]["queue_url"] == f"{cli.endpoint_url}/123456789012/reports.fifo"
    assert lanes["reports"]["dead_letter_queue_url"].endswith("/reports-dlq.fifo")
    assert lanes["reports"]["state_machine_arn"].endswith(":stateMachine:reports")
    assert (lanes["reports"]["max_concurrency"], lanes["reports"]["starts_per_second"]) == (1, 0.5)
    assert lanes["ingest"]["queue_url"].endswith(f"/{cli.stack_name}-ingest-jobs.fifo")
    assert lanes["urgent"]["state_machine_arn"] == cli.stack.state_machine_arn
    [gate] = members.document["gates"]
    assert gate["queue_url"].endswith(f"/{cli.stack_name}-crawl-jobs.fifo")
    assert members.release_queue_url is not None
    assert members.gated_machines == [gate["state_machine_arn"]]
    assert members.lane_machines == [
        cli.stack.state_machine_arn,
        lanes["reports"]["state_machine_arn"],
        lanes["ingest"]["state_machine_arn"],
    ]
    definition = json.loads(
        aws["stepfunctions"].describe_state_machine(stateMachineArn=gate["state_machine_arn"])["definition"]
    )
    assert definition["States"]["Enter gate"]["Parameters"]["QueueUrl"] == gate["queue_url"]
    attributes = aws["sqs"].get_queue_attributes(
        QueueUrl=lanes["reports"]["queue_url"], AttributeNames=["All"]
    )
    assert attributes["Attributes"]["FifoQueue"] == "true"
    assert "reports-dlq.fifo" in attributes["Attributes"]["RedrivePolicy"]
    shared = {
        "gates": [{"name": "g", "state_machine_arn": arn("m")}],
        "lanes": [{"name": "l", "state_machine_arn": arn("m")}],
    }
    with pytest.raises(ConfigurationError, match=r"LANES: gates\[0\]\.state_machine_arn: it is lanes\[0\]'s"):
        local_members(cli.stack, cli.endpoint_url, wait_seconds=1, document=shared)
    with pytest.raises(ConfigurationError, match=r"LANES: lanes\[0\]\.pool: unknown pool 'nope'"):
        local_members(
            cli.stack, cli.endpoint_url, wait_seconds=1, document={"lanes": [{"name": "x", "pool": "nope"}]}
        )
    not_an_arn = {"lanes": [{"name": "x", "state_machine_arn": "not-an-arn"}]}
    with pytest.raises(
        ConfigurationError, match=r"LANES: lanes\[0\]\.state_machine_arn: 'not-an-arn' is not a"
    ):
        local_members(cli.stack, cli.endpoint_url, wait_seconds=1, document=not_an_arn)
    not_a_url = {"gates": [{"name": "g", "queue_url": "gate.fifo"}]}
    with pytest.raises(
        ConfigurationError, match=r"LANES: gates\[0\]\.queue_url: 'gate.fifo' is not a queue URL"
    ):
        local_members(cli.stack, cli.endpoint_url, wait_seconds=1, document=not_a_url)
    null = {"lanes": [{"name": "x", "max_per_group": None}]}
    with pytest.raises(
        ConfigurationError, match=r"LANES: lanes\[0\]\.max_per_group: null is not a value here"
    ):
        local_members(cli.stack, cli.endpoint_url, wait_seconds=1, document=null)


def arn(name: str) -> str:
    """A state machine's ARN in the emulator's account (the emulator creates it by this name)."""
    return f"arn:aws:states:us-east-1:123456789012:stateMachine:{name}"


def test_a_job_sent_to_a_quiet_emulator_starts_on_its_wake_not_at_the_next_scheduled_tick(cli: Cli) -> None:
    """Ticking once an hour, `enqueue --stack` wakes the ticks through the end-event queue: the job starts."""
    with served(cli, "--stack", "woken", "--schedule", "3600", "--wait-seconds", "600") as local:
        env = local.env
        sent = cli.run(
            "--stack", "woken", "enqueue", "{}", "--group", "g", "--name", "w-1", stack=False, env=env
        )
        assert sent.returncode == 0, sent.stderr
        assert "started 1" in local.next_line("tick: ")
        job = cli.run("--stack", "woken", "job", "w-1", "--json", stack=False, env=env)
        assert json.loads(job.stdout)["state"] == "running"
