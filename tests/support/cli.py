"""What the CLI's tests set up through the CLI itself: failed executions to re-run."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import boto3

from dispatcher.local.account import REGION
from dispatcher.local.stack import Stack, create_stack, read_all, register_stack, send_jobs
from dispatcher.local.workflows import set_downstream
from tests.support.cli_runner import Cli


def fail_jobs(cli: Cli, jobs: list[tuple[str, str]]) -> None:
    """Enqueue (name, group) jobs while the downstream API is down; tick until each failed and is spooled."""
    set_downstream(cli.stack.downstream_table, up=False)
    send_jobs(
        cli.stack.queue_url,
        [{"body": json.dumps({"order": name}), "group": group, "name": name} for name, group in jobs],
    )
    aws = {"sqs": boto3.client("sqs", region_name=REGION)}
    started = 0

    def all_started() -> bool:
        nonlocal started
        started += cli.tick_in_process()["started"]
        return started >= len(jobs)

    wait_for(all_started, what="every job started")
    wait_for(lambda: spooled(aws, cli) == len(jobs), what="every failure spooled")
    set_downstream(cli.stack.downstream_table, up=True)


def wait_for(condition: Callable[[], Any], timeout: float = 180.0, what: str = "condition") -> Any:
    """``condition``'s first truthy value; an error after ``timeout``.

    The bound only ends a wait that will never succeed: on a machine running several
    times more than its cores (a test run beside four benchmark processes), the sample
    workflows' redriven executions took over 60 s to succeed.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def spooled(aws: dict[str, Any], cli: Cli) -> int:
    """How many failures the stack's spool queue holds (visible or not)."""
    attributes = aws["sqs"].get_queue_attributes(
        QueueUrl=cli.stack.spool_queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def woken_stack(cli: Cli) -> tuple[str, Stack, str]:
    """A second stack in the test's emulator whose outputs include a ``WakeQueueUrl``: (name, stack, URL)."""
    name = f"{cli.stack_name}-woken"
    stack = create_stack(name, wait_seconds=1)
    sqs = boto3.client("sqs", region_name=REGION)
    wake_queue_url = str(sqs.create_queue(QueueName=f"{name}-end-events")["QueueUrl"])
    register_stack(name, stack, max_concurrency=3, wake_queue_url=wake_queue_url)
    return name, stack, wake_queue_url


def wakes(wake_queue_url: str) -> list[Any]:
    """Every wake on a wake queue (read and deleted), parsed."""
    return [json.loads(message["Body"]) for message in read_all(wake_queue_url)]


def run_and_count_wakes(
    run: Callable[[], subprocess.CompletedProcess[str]], wake_queue_url: str
) -> subprocess.CompletedProcess[str]:
    """Run a command that queues jobs; it must succeed and have woken the dispatcher at most once a second."""
    began = time.monotonic()
    result = run()
    took = time.monotonic() - began
    assert result.returncode == 0, result.stderr
    woken = wakes(wake_queue_url)
    assert woken, "it queued jobs, so it wakes the dispatcher"
    assert all(wake == {"wake": True} for wake in woken)
    assert len(woken) <= 1 + int(took), "at most one wake a second, however many jobs it queued"
    return result
