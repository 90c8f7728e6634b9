"""`dispatcher cancel` and `job` as a user runs them: cancelling a name no job had, twice, and stopping."""

from __future__ import annotations

import json
import time

import pytest

from dispatcher.local.account import pointed_at
from dispatcher.producer import Producer
from tests.support.cli_runner import Cli

UNSEEN = (
    "cancelled {name} (lane default): it will never start; no job of that name was seen yet"
    " (queued, or not sent: one sent within 14 days is dropped)\n"
)


def test_cancelling_a_name_no_job_had_says_so_and_job_says_the_later_job_was_cancelled_in_advance(
    cli: Cli,
) -> None:
    """A typo or a job not sent yet: `cancel` says none was seen; one sent later is dropped, as `job` says."""
    said = cli.run("cancel", "order-7")
    assert (said.returncode, said.stdout) == (0, UNSEEN.format(name="order-7"))
    cancelled = time.time()
    # The entry keeps its moment to the second: a job sent surely later is one sent 2 s on.
    time.sleep(max(0.0, int(cancelled) + 2.01 - time.time()))
    assert cli.run("enqueue", '{"order": 7}', "--group", "g", "--name", "order-7").returncode == 0
    assert json.loads(cli.run("tick", "--json").stdout)["cancelled"] == 1
    report = json.loads(cli.run("job", "order-7", "--json").stdout)
    assert (report["state"], report["cancelled_in_advance"]) == ("cancelled", True)
    assert report["sent_at"] >= report["at"]
    assert report["dropped_at"] >= report["sent_at"]
    text = cli.run("job", "order-7").stdout
    assert text.endswith(
        "  cancelled in advance: its name was cancelled before it was sent, so a tick dropped it\n"
    )


def test_a_second_cancel_keeps_the_first_reason_and_a_job_seen_is_no_longer_in_advance(cli: Cli) -> None:
    """Cancelled twice, the second without a reason: the first reason stays; the answer knows the job now."""
    cli.run("enqueue", "{}", "--group", "g", "--name", "twice")
    first = cli.run("cancel", "twice", "--reason", "upload deleted")
    assert first.stdout == UNSEEN.format(name="twice"), "queued, not yet received: not seen"
    again = cli.run("cancel", "twice", "--json")
    assert json.loads(again.stdout) == {
        "name": "twice",
        "lane": "default",
        "answer": "cancelled",
        "reason": "upload deleted",
        "seen": True,
    }
    assert json.loads(cli.run("job", "twice", "--json").stdout)["reason"] == "upload deleted"


def test_a_running_job_is_stopped_once_and_cancelling_it_again_says_stopped(cli: Cli) -> None:
    """`cancel` of a running job names it in the hint; `--stop` says ABORTED; again, stopped (exit 0)."""
    cli.run("enqueue", "{}", "--group", "g", "--name", "runs")
    assert json.loads(cli.run("tick", "--json").stdout)["started"] == 1
    started = cli.run("cancel", "runs")
    assert started.returncode == 1
    assert started.stdout.endswith(" RUNNING\n  to stop it too: dispatcher cancel runs --stop\n")
    stopped = cli.run("cancel", "runs", "--stop")
    assert (stopped.returncode, stopped.stdout.split()[0], stopped.stdout.split()[-1]) == (
        0,
        "stopped",
        "ABORTED",
    )
    for again in (cli.run("cancel", "runs", "--stop"), cli.run("cancel", "runs")):
        assert (again.returncode, again.stdout.split()[0]) == (0, "stopped")
    report = json.loads(cli.run("job", "runs", "--json").stdout)
    assert (report["state"], report["error"], report["reason"]) == (
        "aborted",
        "dispatcher.Cancelled",
        "cancelled by its producer",
    )


def test_a_producer_made_from_a_stack_name_sends_follows_and_cancels(cli: Cli) -> None:
    """`Producer.from_stack(name)`: the stack's outputs, as `--stack`; nothing copied from `info --json`."""
    with pointed_at(cli.endpoint_url):
        producer = Producer.from_stack(cli.stack_name)
        assert producer.queue_url == cli.stack.queue_url
        producer.send({"order": 1}, group="g", name="from-stack")
        assert producer.job("from-stack").state == "not started"
        assert producer.cancel("from-stack", reason="changed my mind") == "cancelled"
        assert producer.job("from-stack").reason == "changed my mind"
        with pytest.raises(ValueError, match="stack no-such-stack not found in us-east-1"):
            Producer.from_stack("no-such-stack")
        with pytest.raises(ValueError, match=f"stack {cli.stack_name}: no such lane: urgent"):
            Producer.from_stack(cli.stack_name, lane="urgent")


def test_job_refuses_a_name_no_job_can_have_as_cancel_does(cli: Cli) -> None:
    """`job ''` and `job 'a b'` are usage errors (exit 2, one line), as for `cancel`."""
    for name in ("", "a b"):
        looked, cancelled = cli.run("job", name), cli.run("cancel", name)
        assert (looked.returncode, cancelled.returncode) == (2, 2), name
        assert looked.stderr == cancelled.stderr, name
        assert looked.stderr.startswith("dispatcher: error: not a job's name: ")
        assert len(looked.stderr.splitlines()) == 1
