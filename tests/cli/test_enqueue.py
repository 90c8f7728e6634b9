"""`dispatcher enqueue`, run as a user runs it: one job, bulk JSON Lines, collisions, Ctrl-C, bad input."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from dispatcher import cli as cli_module
from dispatcher.cli.config import Aws
from dispatcher.cli.enqueue import line_ranges
from dispatcher.core.messages import deduplication_id
from dispatcher.local.stack import read_all
from tests.support.cli_runner import Cli, crash_once_before


def test_cli_enqueue_one_job_with_name_and_from_stdin(cli: Cli, aws: dict[str, Any]) -> None:
    """`enqueue BODY --group --name` and `enqueue - --group` send verbatim bodies with explicit dedup ids."""
    first = cli.run("enqueue", '{"order": 42}', "--group", "customer-7", "--name", "order-42")
    assert first.returncode == 0
    assert "sent " in first.stdout
    assert "name order-42" in first.stdout
    second = cli.spawn("enqueue", "-", "--group", "customer-7", stdin='{"order":  43}')  # a real stdin
    assert second.returncode == 0
    messages = read_all(cli.stack.queue_url, aws["sqs"])
    assert [message["Body"] for message in messages] == ['{"order": 42}', '{"order":  43}']
    assert messages[0]["MessageAttributes"]["ExecutionName"]["StringValue"] == "order-42"
    dedup = messages[0]["Attributes"]["MessageDeduplicationId"]
    assert dedup == deduplication_id("order-42", '{"order": 42}')
    assert messages[1]["Attributes"]["MessageDeduplicationId"]


def test_cli_enqueue_same_name_with_another_body_is_dead_lettered_as_a_collision(
    cli: Cli, aws: dict[str, Any]
) -> None:
    """Two jobs under one name, other bodies, in a second: one starts, one is dead-lettered as a collision."""
    for order in (42, 43):
        sent = cli.run("enqueue", json.dumps({"order": order}), "--group", "c7", "--name", "order-42")
        assert sent.returncode == 0, sent.stderr
    again = cli.run("enqueue", '{"order": 42}', "--group", "c7", "--name", "order-42")
    assert again.returncode == 0, "a re-send of the first job is deduplicated by SQS, not an error"
    cli.tick_in_process()
    executions = aws["stepfunctions"].list_executions(stateMachineArn=cli.stack.state_machine_arn)
    assert [execution["name"] for execution in executions["executions"]] == ["order-42"]
    [letter] = read_all(cli.stack.dead_letter_queue_url, aws["sqs"])
    assert letter["Body"] == '{"order": 43}'
    reason = letter["MessageAttributes"]["DispatchError"]["StringValue"]
    assert reason.startswith("name collision: execution 'order-42' already exists with a different input")
    assert read_all(cli.stack.queue_url, aws["sqs"]) == []


INTERRUPTED_ENQUEUES = {
    "all-named": (True, "sending the same jobs again is safe: each has a name, and starts once"),
    "some-unnamed": (
        False,
        "5 have no name: sent again, those sent already would start twice"
        " (send only the rest, or give every job a name)",
    ),
}


@pytest.mark.parametrize("case", INTERRUPTED_ENQUEUES.values(), ids=INTERRUPTED_ENQUEUES.keys())
def test_cli_enqueue_interrupted_says_what_was_sent_and_whether_to_send_again(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    case: tuple[bool, str],
) -> None:
    """Ctrl-C after the first batch: exit 130, one line with the count and whether sending again is safe."""
    named, advice = case
    path = tmp_path / "jobs.jsonl"
    lines = [
        {
            "input": {"n": index},
            "group": f"g{index}",
            **({"name": f"n-{index}"} if named or index >= 5 else {}),
        }
        for index in range(25)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    crash_once_before(monkeypatch, "sqs.SendMessageBatch", after=1)
    assert cli_module.main(["--stack", cli.stack_name, "enqueue", "--file", str(path)]) == 130
    assert (
        capsys.readouterr().err.splitlines()[-1]
        == f"dispatcher: interrupted: 10 of 25 job(s) sent (lines 1-10 of {path}); {advice}"
    )


def test_cli_enqueue_interrupted_names_the_lines_sent_which_needn_t_be_the_first(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A batch takes the head of each group: lines 1, 4-12 went first, not lines 1-10."""
    path = tmp_path / "jobs.jsonl"
    groups = ["a", "a", "a", *(f"g{index}" for index in range(12))]
    path.write_text(
        "".join(json.dumps({"input": {"n": n}, "group": group}) + "\n" for n, group in enumerate(groups))
    )
    crash_once_before(monkeypatch, "sqs.SendMessageBatch", after=1)
    assert cli_module.main(["--stack", cli.stack_name, "enqueue", "--file", str(path)]) == 130
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"dispatcher: interrupted: 10 of 15 job(s) sent (lines 1, 4-12 of {path}); ")
    bodies = {json.loads(message["Body"])["n"] for message in read_all(cli.stack.queue_url)}
    assert bodies == {0, *range(3, 12)}, "the lines said are the ones on the queue"


def test_line_ranges_are_short_and_say_how_many_more() -> None:
    """Consecutive lines collapse into ranges; past the shown ranges, how many more is said."""
    assert line_ranges([7]) == "line 7"
    assert line_ranges([1, 2, 3, 5, 9, 10]) == "lines 1-3, 5, 9-10"
    assert line_ranges(list(range(1, 40, 2)), shown=2) == "lines 1, 3 and 18 more range(s)"


def test_cli_enqueue_empty_file_says_there_is_nothing_to_send(cli: Cli, tmp_path: Path) -> None:
    """`enqueue --file` on an empty file: exit 0 and a line that says so (it printed nothing)."""
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    result = cli.run("enqueue", "--file", str(path))
    assert (result.returncode, result.stdout) == (0, f"nothing to send: {path} holds no jobs\n")
    piped = cli.run("enqueue", "--file", "-", "--json", stdin="")
    assert json.loads(piped.stdout) == {"sent": [], "failed": [], "duplicates": 0}


def test_cli_enqueue_bulk_json_lines_names_every_invalid_line_and_sends_nothing(
    cli: Cli, aws: dict[str, Any], tmp_path: Path
) -> None:
    """`enqueue --file` checks every line first: invalid ones are each named (exit 2) and nothing is sent."""
    lines = [
        {"input": {"n": 1}, "group": "a"},
        {"input": {"n": 2}, "group": "a", "name": "two"},
        {"body": "not json", "group": "b"},
        {"input": {"n": 3}, "group": "a", "name": "has space"},
        {"input": {"n": 4}},
    ]
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = cli.run("enqueue", "--file", str(path), "--group", "c")
    assert result.returncode == 2
    assert result.stdout == ""
    failures = result.stderr.splitlines()
    assert len(failures) == 2
    assert f'{path}:3: "body": input is not valid JSON' in failures[0]
    assert f'{path}:4: "name": execution name contains whitespace' in failures[1]
    assert read_all(cli.stack.queue_url, aws["sqs"]) == []

    path.write_text("\n".join(json.dumps(line) for line in lines[:2] + lines[4:]) + "\n")
    result = cli.run("enqueue", "--file", str(path), "--group", "c")
    assert result.returncode == 0, result.stderr
    assert "sent 3 job(s)" in result.stdout
    bodies = [message["Body"] for message in read_all(cli.stack.queue_url, aws["sqs"])]
    assert sorted(bodies) == ['{"n": 1}', '{"n": 2}', '{"n": 4}']
    assert bodies.index('{"n": 1}') < bodies.index('{"n": 2}')


@pytest.mark.parametrize(
    ("arguments", "stdin", "message", "status"),
    [
        (("enqueue", "{}"), None, "--group is required", 2),
        (("enqueue", "--group", "g"), None, "give the job's input as BODY", 2),
        (("enqueue", "{}", "--file", "-"), "", "not both", 2),
        (("enqueue", "--file", "/no/such/file"), None, "cannot read /no/such/file", 2),
        (("enqueue", "--file", "-", "--group", "g"), "{broken\n", "-:1: not JSON", 2),
        (("enqueue", "--file", "-"), '{"group": "g"}\n', 'expected an object with "input"', 2),
    ],
    ids=["no-group", "no-body", "body-and-file", "missing-file", "broken-line", "no-input"],
)
def test_cli_enqueue_bad_input_is_one_clear_line(
    cli: Cli, arguments: tuple[str, ...], stdin: str | None, message: str, status: int
) -> None:
    """Bad enqueue input: one line naming the problem, and nothing sent."""
    result = cli.run(*arguments, stdin=stdin)
    assert result.returncode == status
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr


def test_cli_enqueue_sends_a_repeated_line_once_and_says_how_many_repeated(
    cli: Cli, aws: dict[str, Any], tmp_path: Path
) -> None:
    """Lines with an earlier line's name and input are one job: sent once, and counted (not "sent 3")."""
    line = json.dumps({"input": {"n": 1}, "group": "a", "name": "one"}) + "\n"
    other = json.dumps({"input": {"n": 2}, "group": "a", "name": "two"}) + "\n"
    path = tmp_path / "jobs.jsonl"
    path.write_text(line + other + line + line)
    result = cli.run("enqueue", "--file", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(
        "sent 2 job(s); 2 line(s) repeated an earlier line's name and input: sent once\n"
    )
    assert json.loads(cli.run("enqueue", "--file", str(path), "--json").stdout)["duplicates"] == 2
    assert [message["Body"] for message in read_all(cli.stack.queue_url, aws["sqs"])] == [
        '{"n": 1}',
        '{"n": 2}',
    ]


def test_cli_enqueue_ctrl_c_mid_batch_counts_exactly_what_is_on_the_queue(
    cli: Cli, aws: dict[str, Any], tmp_path: Path
) -> None:
    """Ctrl-C while a batch is in flight: the batch is finished and counted, then it stops (exit 130).

    The interrupt arrives once SQS has taken the first batch, before the producer has read
    the answer: stopping there would say 0 sent with 10 on the queue.
    """
    path = tmp_path / "jobs.jsonl"
    lines = [{"input": {"n": index}, "group": f"g{index}", "name": f"n-{index}"} for index in range(25)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    def ctrl_c(**_: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)

    real_client = Aws.client

    def client(self: Aws, service: str) -> Any:
        made = real_client(self, service)
        made.meta.events.register_first("after-call.sqs.SendMessageBatch", ctrl_c, unique_id="ctrl-c")
        return made

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Aws, "client", client)
        result = cli.run("enqueue", "--file", str(path))
    assert result.returncode == 130
    assert result.stderr.splitlines()[-1] == (
        f"dispatcher: interrupted: 10 of 25 job(s) sent (lines 1-10 of {path});"
        " sending the same jobs again is safe: each has a name, and starts once"
    )
    assert len(read_all(cli.stack.queue_url, aws["sqs"])) == 10
