"""The CLI's commands that queue jobs wake the dispatcher: `enqueue` and `redrive-dead-letters`.

`rerun --restart` is in test_rerun.py (its failures need executions that run).
"""

from __future__ import annotations

import json
from typing import Any

from dispatcher.local.stack import read_all
from tests.support.cli import run_and_count_wakes, wakes, woken_stack
from tests.support.cli_runner import Cli


def test_enqueue_wakes_once_after_queueing_from_the_stack_s_output_or_the_environment(
    cli: Cli, tmp_path: Any
) -> None:
    """Thirty jobs from a file: wakes, at most one a second; a stack without WakeQueueUrl sends none."""
    name, stack, wake_queue_url = woken_stack(cli)
    lines = tmp_path / "jobs.jsonl"
    lines.write_text("".join(json.dumps({"input": {"n": n}, "group": f"g{n}"}) + "\n" for n in range(30)))
    run_and_count_wakes(
        lambda: cli.run("--stack", name, "enqueue", "--file", str(lines), stack=False), wake_queue_url
    )
    assert len(read_all(stack.queue_url)) == 30
    unwoken = cli.run("enqueue", "{}", "--group", "g")
    assert unwoken.returncode == 0, unwoken.stderr
    assert wakes(wake_queue_url) == [], "the stack has no WakeQueueUrl: no wake, and the job is sent"
    variables = {**stack.environment(3), "WAKE_QUEUE_URL": wake_queue_url}
    by_environment = cli.run("enqueue", "{}", "--group", "g", stack=False, env=cli.environment(**variables))
    assert by_environment.returncode == 0, by_environment.stderr
    assert wakes(wake_queue_url) == [{"wake": True}]


def test_enqueue_whose_wake_fails_still_sends_and_exits_0(cli: Cli, aws: dict[str, Any]) -> None:
    """A wake queue that refuses (gone): the job is queued, the command succeeds; the schedule starts it."""
    name, stack, wake_queue_url = woken_stack(cli)
    aws["sqs"].delete_queue(QueueUrl=wake_queue_url)
    sent = cli.run("--stack", name, "enqueue", "{}", "--group", "g", stack=False)
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.startswith("sent ")
    assert len(read_all(stack.queue_url)) == 1


def test_redrive_dead_letters_wakes_after_moving_them(cli: Cli, aws: dict[str, Any]) -> None:
    """Dead letters moved back to the queue: a wake follows them (one, within a second)."""
    name, stack, wake_queue_url = woken_stack(cli)
    for n in range(3):
        aws["sqs"].send_message(
            QueueUrl=stack.dead_letter_queue_url,
            MessageBody=json.dumps({"n": n}),
            MessageGroupId=f"g{n}",
            MessageDeduplicationId=f"d{n}",
        )
    dry = cli.run("--stack", name, "redrive-dead-letters", "--dry-run", stack=False)
    assert dry.returncode == 0, dry.stderr
    assert wakes(wake_queue_url) == [], "a dry run queues nothing, so it wakes nothing"
    run_and_count_wakes(lambda: cli.run("--stack", name, "redrive-dead-letters", stack=False), wake_queue_url)
    assert len(read_all(stack.queue_url)) == 3
