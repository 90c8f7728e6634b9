"""`dead-letters` and `redrive-dead-letters` as a user runs them, against the emulator."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from dispatcher import cli as cli_module
from dispatcher.cli.config import Aws
from dispatcher.local.stack import read_all
from tests.faults.operator import expire_holds
from tests.support.cli_runner import Cli, crash_once_before


def dead_letter(aws: dict[str, Any], cli: Cli) -> list[str]:
    """Three poison messages in group g1 (with Tenant attributes), a bad name in g2: dead-lettered."""
    ids = []
    for index in range(3):
        ids.append(
            aws["sqs"].send_message(
                QueueUrl=cli.stack.queue_url,
                MessageBody=f"not json {index}",
                MessageGroupId="g1",
                MessageDeduplicationId=f"poison-{index}",
                MessageAttributes={"Tenant": {"DataType": "String", "StringValue": f"t-{index}"}},
            )["MessageId"]
        )
    ids.append(
        aws["sqs"].send_message(
            QueueUrl=cli.stack.queue_url,
            MessageBody="{}",
            MessageGroupId="g2",
            MessageDeduplicationId="bad-name",
            MessageAttributes={"ExecutionName": {"DataType": "String", "StringValue": "bad name"}},
        )["MessageId"]
    )
    assert cli.tick_in_process()["dead_lettered"] == 4
    return ids


def test_dead_letters_lists_each_reason_and_consumes_nothing(cli: Cli, aws: dict[str, Any]) -> None:
    """A table of id, group, name and DispatchError; --json counts the reasons; the DLQ keeps them all."""
    ids = dead_letter(aws, cli)
    table = cli.run("dead-letters")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["MESSAGE", "ID", "GROUP", "NAME", "DISPATCH", "ERROR"]
    assert "input is not valid JSON" in table.stdout
    assert "invalid ExecutionName: execution name contains whitespace" in table.stdout
    assert "4 dead letter(s): " in table.stdout
    document = json.loads(cli.run("dead-letters", "--json").stdout)
    assert document["total"] == 4
    assert sum(document["reasons"].values()) == 4
    rows = table.stdout.splitlines()[1:-2]
    not_json = sum("input is not valid JSON" in row for row in rows)
    assert document["reasons"]["input is not valid JSON"] == not_json
    assert table.stdout.splitlines()[-1].split(": ", 1)[1] == ", ".join(
        f"{kind} {number}" for kind, number in document["reasons"].items()
    )
    assert all(letter["dead_lettered_at"].endswith("Z") for letter in document["dead_letters"])
    assert {letter["name"] for letter in document["dead_letters"]} == {*ids[:3], "bad name"}
    assert len(read_all(cli.stack.dead_letter_queue_url)) == 4, "listing consumes nothing"


def test_redrive_dead_letters_moves_each_back_once_in_group_order(cli: Cli, aws: dict[str, Any]) -> None:
    """--dry-run moves nothing; a move keeps all but DispatchError, in group order; twice moves once."""
    ids = dead_letter(aws, cli)
    dry = cli.run("redrive-dead-letters", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.rstrip().endswith(
        "would move 4 dead letter(s) to the job queue (dry run: nothing changed)"
    )
    assert read_all(cli.stack.queue_url) == []

    moved = cli.run("redrive-dead-letters")
    assert moved.returncode == 0, moved.stderr
    assert "moved 4 dead letter(s) to the job queue" in moved.stdout
    again = cli.run("redrive-dead-letters", "--json")
    assert json.loads(again.stdout)["total"] == 0, "nothing is moved twice"
    assert read_all(cli.stack.dead_letter_queue_url) == []

    back = read_all(cli.stack.queue_url)
    g1 = [message for message in back if message["Attributes"]["MessageGroupId"] == "g1"]
    assert [message["Body"] for message in g1] == ["not json 0", "not json 1", "not json 2"], "send order"
    for index, message in enumerate(g1):
        attributes = {key: value["StringValue"] for key, value in message["MessageAttributes"].items()}
        assert attributes == {"Tenant": f"t-{index}", "ExecutionName": ids[index]}, "the name it had"
    [g2] = [message for message in back if message["Attributes"]["MessageGroupId"] == "g2"]
    assert {key: value["StringValue"] for key, value in g2["MessageAttributes"].items()} == {
        "ExecutionName": "bad name"
    }


def test_an_interrupted_dead_letter_redrive_moves_nothing_twice(
    cli: Cli, aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed after a send, before its delete: once its hold runs out, running again moves nothing twice."""
    dead_letter(aws, cli)
    unhooked = Aws.client
    crash_once_before(monkeypatch, "sqs.DeleteMessageBatch", killed=True)
    assert cli_module.main(["--stack", cli.stack_name, "redrive-dead-letters"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "dispatcher: interrupted: 0 dead letter(s) moved; the rest are back on the DLQ: run the same"
        " command again to move them (nothing is moved or started twice)"
    )
    monkeypatch.setattr(Aws, "client", unhooked)
    assert json.loads(cli.run("redrive-dead-letters", "--json").stdout)["total"] == 0, "all still held"
    expire_holds(cli.stack.dead_letter_queue_url)
    assert cli_module.main(["--stack", cli.stack_name, "redrive-dead-letters"]) == 0
    back = read_all(cli.stack.queue_url)
    assert sorted(message["Body"] for message in back) == ["not json 0", "not json 1", "not json 2", "{}"]
    assert read_all(cli.stack.dead_letter_queue_url) == []


def test_redrive_dead_letters_rate_and_max(cli: Cli, aws: dict[str, Any]) -> None:
    """--max N moves the first N (in group order); --rate R takes at least (N - 1) / R seconds."""
    dead_letter(aws, cli)
    began = time.monotonic()
    result = cli.run("redrive-dead-letters", "--max", "3", "--rate", "4", "--json")
    elapsed = time.monotonic() - began
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total"] == 3
    assert elapsed >= 2 / 4
    assert len(read_all(cli.stack.dead_letter_queue_url)) == 1
    bad = cli.run("redrive-dead-letters", "--rate", "0")
    assert bad.returncode == 2
    assert "the rate must be > 0" in bad.stderr
