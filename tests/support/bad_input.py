"""The CLI's bad input: a bare shell's settings and files, and how a test runs a command that must fail."""

from __future__ import annotations

import io

import pytest

from dispatcher import cli as cli_module

CONFIGURED = {
    "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo",
    "DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dlq.fifo",
    "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:work",
    "STATE_TABLE": "jobs-state",
    "MAX_CONCURRENCY": "5",
}


LINES = {
    "no-group.jsonl": '{"input": {"x": 2}}\n',
    "mixed.jsonl": (
        '{"input": {"n": 1}, "group": "a"}\n'
        "{broken\n"
        '{"body": "not json", "group": "b"}\n'
        "\n"
        '{"input": {"n": 3}, "group": "a", "name": "has space"}\n'
        '{"group": "g"}\n'
        '{"input": {"n": 4}, "group": 7}\n'
    ),
    "unknown-keys.jsonl": (
        '{"input": {"n": 1}, "group": "a", "nmae": "first"}\n'
        '{"input": {"n": 2}, "group": "a", "lane": "urgent"}\n'
    ),
    "collisions.jsonl": (
        '{"input": {"n": 1}, "group": "a", "name": "one"}\n'
        '{"input": {"n": 1}, "group": "a", "name": "one"}\n'
        '{"input": {"n": 2}, "group": "a", "name": "one"}\n'
        '{"input": {"n": 3}, "group": "b", "name": "two"}\n'
        '{"input": {"n": 4}, "group": "b", "name": "two"}\n'
    ),
}


PREFIX = "dispatcher: error: "


def run(capsys: pytest.CaptureFixture[str], arguments: list[str], stdin: str = "") -> tuple[int, list[str]]:
    """``dispatcher ARGUMENTS``: exit status and the lines on stderr (stdout must stay empty)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(stdin))
        try:
            status = cli_module.main(arguments)
        except SystemExit as exit_status:  # argparse's own usage errors
            status = int(exit_status.code or 0)
    captured = capsys.readouterr()
    assert captured.out == ""
    return status, captured.err.splitlines()
