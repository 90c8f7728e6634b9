"""Re-running failures as a user does: `failed`, `rerun --restart|--redrive`, through the dispatcher's cap.

moto runs the sample workflow here (``EXECUTE``, no wait): it calls the
simulated downstream API and fails with ``DownstreamUnavailable`` while it is down.
The emulator delivers each failure's status change event to the stack's spool, and
emulates `RedriveExecution` (moto runs the whole workflow again).
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from dispatcher import cli as cli_module
from dispatcher.adapters.jobs import JobTable
from dispatcher.cli.config import Aws
from dispatcher.core.jobs import JobRecord, JobState
from dispatcher.local.account import REGION, environment
from dispatcher.local.stack import read_all
from dispatcher.producer import Job
from tests.support.cli import fail_jobs, run_and_count_wakes, wait_for
from tests.support.cli_runner import SCRIPT, Cli, crash_once_before

EXECUTE = True
WAIT_SECONDS = 0


def failed(cli: Cli, *arguments: str) -> dict[str, Any]:
    """`dispatcher failed --json`'s answer."""
    result = cli.run("failed", "--json", *arguments)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def executions(aws: dict[str, Any], cli: Cli) -> dict[str, dict[str, Any]]:
    """Every execution of the stack's state machine, described, by name."""
    listed = aws["stepfunctions"].list_executions(stateMachineArn=cli.stack.state_machine_arn)["executions"]
    return {
        item["name"]: aws["stepfunctions"].describe_execution(executionArn=item["executionArn"])
        for item in listed
    }


def queued_jobs(cli: Cli) -> list[dict[str, Any]]:
    """The jobs on the stack's queue (body and attributes), received and left there."""
    return [
        {
            "body": message["Body"],
            "group": message["Attributes"]["MessageGroupId"],
            "attributes": {
                key: value["StringValue"] for key, value in message.get("MessageAttributes", {}).items()
            },
        }
        for message in read_all(cli.stack.queue_url)
    ]


def test_rerun_restart_queues_new_jobs_in_the_original_groups_and_they_start_once(
    cli: Cli, aws: dict[str, Any]
) -> None:
    """`failed` lists them; --dry-run changes nothing; --restart queues each failure once, in its group."""
    fail_jobs(cli, [("order-1", "customer-1"), ("order-2", "customer-2"), ("order-3", "customer-1")])
    table = cli.run("failed")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == ["NAME", "STATUS", "ERROR", "STOPPED", "(UTC)", "CAUSE"]
    assert {"order-1", "order-2", "order-3"} <= set(table.stdout.split())
    assert "3 failed execution(s): FAILED 3; by error: DownstreamUnavailable 3" in table.stdout
    narrowed = failed(cli, "--error", "Downstream*", "--name", "order-2", "--since", "1h", "--until", "0s")
    assert [failure["name"] for failure in narrowed["failures"]] == ["order-2"]
    assert narrowed["counts"] == {"status": {"FAILED": 1}, "error": {"DownstreamUnavailable": 1}}
    assert failed(cli, "--status", "failed,aborted")["total"] == 3
    other = cli.run("failed", "--status", "TIMED_OUT")
    assert (other.returncode, other.stdout) == (0, "no spooled failures match\n")
    for wrong in (["--since", "yesterday"], ["--status", "SUCCEEDED"]):
        with pytest.raises(SystemExit) as usage:
            cli_module.main(["failed", *wrong])
        assert usage.value.code == 2
    listed = (
        io.StringIO()
    )  # configured by SPOOL_QUEUE_URL alone; --dry-run accepted (listing changes nothing)
    with environment({"SPOOL_QUEUE_URL": cli.stack.spool_queue_url}):
        assert cli_module.main(["failed", "--dry-run", "--json"], out=listed) == 0
    assert json.loads(listed.getvalue())["total"] == 3
    dry = cli.run("rerun", "--restart", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would queue restart order-1 as order-1-rerun-" in dry.stdout
    assert "in group customer-1 (recorded)" in dry.stdout
    assert dry.stdout.rstrip().endswith("would queue 3 restart job(s), skipped 0 (dry run: nothing changed)")
    assert failed(cli)["total"] == 3
    assert read_all(cli.stack.queue_url) == []

    first = cli.run("rerun", "--restart", "--max", "2", "--json")
    assert first.returncode == 0, first.stderr
    queued = json.loads(first.stdout)["queued"]
    assert len(queued) == 2, "--max 2"
    expected = {"order-1": "customer-1", "order-2": "customer-2", "order-3": "customer-1"}
    assert all((job["group"], job["group_source"]) == (expected[job["name"]], "recorded") for job in queued)
    assert failed(cli)["total"] == 1, "a spool message leaves once its job is queued"
    rest = cli.run("rerun", "--restart", "--json")
    queued += json.loads(rest.stdout)["queued"]
    names = {job["name"]: job["job_name"] for job in queued}
    assert all(names[name].startswith(f"{name}-rerun-") for name in names)
    assert failed(cli)["total"] == 0

    started = 0

    def all_restarted() -> bool:
        nonlocal started
        started += cli.tick_in_process()["started"]
        return started >= len(names)

    wait_for(all_restarted, what="the restarts started")
    final = wait_for(
        lambda: (
            (found := executions(aws, cli))
            and all(found.get(job, {}).get("status") == "SUCCEEDED" for job in names.values())
            and found
        ),
        what="the restarts succeeded",
    )
    for original, job in names.items():
        assert json.loads(final[job]["input"]) == json.loads(final[original]["input"]), "the same input"
        assert final[original]["status"] == "FAILED", "the failed execution is left as it was"
    assert len(final) == 6, "each failure restarted exactly once"


def test_rerun_redrive_continues_the_same_executions_under_the_cap_and_never_twice(
    cli: Cli, aws: dict[str, Any]
) -> None:
    """--redrive queues redrive jobs; the dispatcher redrives at most MAX at once, once each."""
    jobs = [(f"order-{index}", f"customer-{index % 2}") for index in range(5)]
    fail_jobs(cli, jobs)
    assert cli.run("set-max", "2").returncode == 0
    result = cli.run("rerun", "--redrive")
    assert result.returncode == 0, result.stderr
    assert "queued redrive order-0 (redriveCount 0) in group customer-0 (recorded)" in result.stdout
    redriven = []
    while len(redriven) < len(jobs):
        report = cli.tick_in_process()
        assert report["started"] <= 2, report
        assert report["started"] == report["redriven"]
        redriven += [report["redriven"]] * report["redriven"]
        if report["started"] == 0:
            time.sleep(0.3)
    final = wait_for(
        lambda: (
            (found := executions(aws, cli))
            and all(found[name]["status"] == "SUCCEEDED" for name, _ in jobs)
            and found
        ),
        what="the redriven executions succeeded",
    )
    assert {name: final[name].get("redriveCount") for name, _ in jobs} == dict.fromkeys(
        (name for name, _ in jobs), 1
    )
    assert len(final) == len(jobs), "a redrive is the same execution, not a new one"

    # The same redrive job delivered again (a crash before its delete, after SQS's
    # five-minute deduplication): the dispatcher sees the redrive happened.
    aws["sqs"].send_message(
        QueueUrl=cli.stack.queue_url,
        MessageBody="{}",
        MessageGroupId="again",
        MessageDeduplicationId="again",
        MessageAttributes=Job("{}", "again", name="order-0", redrive_count=0).attributes(),
    )
    report = cli.tick_in_process()
    assert (report["started"], report["already_started"]) == (0, 1)
    assert executions(aws, cli)["order-0"]["redriveCount"] == 1


def test_a_rerun_whose_start_record_cant_be_read_guesses_no_group_and_stays_spooled(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start record still throttled after retries: the failure stays spooled, in no guessed group."""
    fail_jobs(cli, [("order-1", "customer-1")])
    unhooked = Aws.client

    def throttle(**_: Any) -> None:
        raise ClientError(
            {
                "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            "Query",
        )

    def client(self: Aws, service: str) -> Any:
        made = unhooked(self, service)
        made.meta.events.register("before-call.dynamodb.Query", throttle)
        return made

    monkeypatch.setattr(Aws, "client", client)
    for mode in ("--redrive", "--restart"):
        result = cli.run("rerun", mode, "--json")
        assert result.returncode == 0, result.stderr
        assert "could not read the start records" in result.stderr
        assert "their failures stay on the spool; run this again" in result.stderr
        document = json.loads(result.stdout)
        assert document["queued"] == []
        [skipped] = document["skipped"]
        assert skipped["name"] == "order-1"
        assert skipped["skipped"].startswith("its start record can't be read now (")
        assert "ThrottlingException" in skipped["skipped"]
        assert skipped["skipped"].endswith("): run this again")
    assert read_all(cli.stack.queue_url) == [], "no job queued in a group of its own"
    monkeypatch.setattr(Aws, "client", unhooked)
    assert failed(cli)["total"] == 1, "the failure is still spooled"
    again = cli.run("rerun", "--redrive")
    assert again.returncode == 0, again.stderr
    assert "queued redrive order-1 (redriveCount 0) in group customer-1 (recorded)" in again.stdout


def test_an_interrupted_rerun_loses_nothing_and_a_second_run_queues_each_job_once(cli: Cli) -> None:
    """Ctrl-C mid-way gives back what it had not queued; running again queues the rest, nothing twice."""
    names = [f"order-{index}" for index in range(5)]
    fail_jobs(cli, [(name, "customer") for name in names])
    process = subprocess.Popen(
        [str(SCRIPT), "--stack", cli.stack_name, "rerun", "--restart", "--rate", "0.1"],
        env=cli.environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sqs = boto3.client("sqs", region_name=REGION)

    def queued() -> int:
        attributes = sqs.get_queue_attributes(
            QueueUrl=cli.stack.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

    def spooled() -> int:
        """Spool messages not yet deleted, visible or held by the running rerun."""
        attributes = sqs.get_queue_attributes(
            QueueUrl=cli.stack.spool_queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(count) for count in attributes.values())

    # Queued *and* taken off the spool: a Ctrl-C between the two leaves all 5 spooled (the
    # next run sends the same job again, deduplicated: the test below), which is not this case.
    wait_for(lambda: queued() >= 1 and spooled() < len(names), what="the first re-run job queued")
    # At one job every 10 s, the second is 10 s after the first: the Ctrl-C comes well before
    # it even on a loaded machine (the first is queued at once, so the test takes no longer).
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (
        "dispatcher: interrupted: 1 re-run job(s) queued; the failures not queued are back on the spool:"
        " run the same command again to finish (no failure is re-run twice)"
    )
    left = failed(cli)["total"]
    assert 0 < left < len(names), "interrupted mid-way; the rest given back at once"
    again = cli.run("rerun", "--restart")
    assert again.returncode == 0, again.stderr
    assert failed(cli)["total"] == 0
    jobs = queued_jobs(cli)
    restarted = sorted(job["attributes"]["ExecutionName"].split("-rerun-")[0] for job in jobs)
    assert restarted == names, "every failure queued exactly once"


def test_a_crash_between_queueing_and_the_spool_delete_queues_the_same_job_again(
    cli: Cli, aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job is queued but its spool message stays: the next run queues the identical job, deduplicated."""
    fail_jobs(cli, [("order-1", "customer-1")])
    crash_once_before(monkeypatch, "sqs.DeleteMessageBatch")
    assert cli_module.main(["--stack", cli.stack_name, "rerun", "--restart"]) == 130
    assert failed(cli)["total"] == 1, "the spool message is still there"
    assert cli_module.main(["--stack", cli.stack_name, "rerun", "--restart"]) == 0
    assert failed(cli)["total"] == 0
    jobs = queued_jobs(cli)
    assert len(jobs) == 1, "the second send was the same job, deduplicated by SQS"
    name = jobs[0]["attributes"]["ExecutionName"]
    aws["sqs"].send_message(
        QueueUrl=cli.stack.queue_url,
        MessageBody=jobs[0]["body"],
        MessageGroupId="customer-1",
        MessageDeduplicationId=name,
        MessageAttributes={"ExecutionName": {"DataType": "String", "StringValue": name}},
    )
    assert cli.tick_in_process()["started"] == 1
    wait_for(lambda: executions(aws, cli)[name]["status"] == "SUCCEEDED", what="the restart ended")
    # The same job once more, after SQS's deduplication window: it is found already started.
    aws["sqs"].send_message(
        QueueUrl=cli.stack.queue_url,
        MessageBody=jobs[0]["body"],
        MessageGroupId="customer-1",
        MessageDeduplicationId="after-the-window",
        MessageAttributes={"ExecutionName": {"DataType": "String", "StringValue": name}},
    )
    report = cli.tick_in_process()
    assert (report["started"], report["already_started"]) == (0, 1)


def test_a_failure_queued_one_way_by_a_killed_run_is_not_re_run_the_other_way(
    cli: Cli, aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after queueing a redrive job, before deleting the spool message: --restart refuses it."""
    fail_jobs(cli, [("order-1", "customer-1"), ("order-2", "customer-2")])
    crash_once_before(monkeypatch, "sqs.DeleteMessageBatch")
    assert cli_module.main(["--stack", cli.stack_name, "rerun", "--redrive", "--name", "order-1"]) == 130
    assert failed(cli)["total"] == 2, "order-1's spool message is still there"
    refusal = "skipped order-1: an earlier run queued it for --redrive (its job may still be waiting):"
    dry = cli.run("rerun", "--restart", "--dry-run")
    assert refusal in dry.stdout
    assert "would queue restart order-2 as order-2-rerun-" in dry.stdout
    switched = cli.run("rerun", "--restart")
    assert switched.returncode == 0, switched.stderr
    assert refusal + " finish with `dispatcher rerun --redrive`" in switched.stdout
    assert switched.stdout.rstrip().endswith(
        "queued 1 restart job(s), skipped 1; the dispatcher runs them within MAX"
    )
    assert [failure["name"] for failure in failed(cli)["failures"]] == ["order-1"]
    finished = cli.run("rerun", "--redrive")
    assert finished.returncode == 0, finished.stderr
    assert failed(cli)["total"] == 0
    jobs = sorted(
        (job["attributes"]["ExecutionName"], job["attributes"].get("DispatchAction"))
        for job in queued_jobs(cli)
    )
    assert len(jobs) == 2, "order-1's redrive job queued again was the same job, deduplicated by SQS"
    assert jobs[0] == ("order-1", "redrive")
    assert jobs[1][0].startswith("order-2-rerun-"), "order-1 is never restarted"


def test_a_failure_whose_job_was_cancelled_stays_on_the_spool_and_is_never_re_run(cli: Cli) -> None:
    """A job stopped by ``cancel --stop`` keeps its record: ``rerun`` skips it, either way, and says why."""
    fail_jobs(cli, [("order-1", "customer-1"), ("order-2", "customer-2")])
    table = JobTable(
        boto3.client("dynamodb", region_name=REGION), cli.stack.state_table, cli.stack.state_machine_arn
    )
    # What `cancel order-1 --stop` keeps of a job it stopped (its execution then ends ABORTED).
    table.write(
        [JobRecord("default", "order-1", JobState.CANCELLED, "customer gone", time.time(), stopped=True)]
    )
    for mode in ("--redrive", "--restart"):
        result = cli.run("rerun", mode, "--dry-run", "--json")
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert [job["name"] for job in document["queued"]] == ["order-2"]
        [skipped] = document["skipped"]
        assert (skipped["name"], skipped["skipped"]) == (
            "order-1",
            "cancelled (customer gone): a cancelled job is never re-run",
        )
    assert failed(cli)["total"] == 2, "both failures are still spooled"


def test_rerun_restart_wakes_the_dispatcher_after_queueing(cli: Cli, aws: dict[str, Any]) -> None:
    """`rerun --restart` configured from the environment with WAKE_QUEUE_URL: the jobs, then a wake."""
    fail_jobs(cli, [("order-1", "customer-1"), ("order-2", "customer-2")])
    wake_queue_url = aws["sqs"].create_queue(QueueName=f"{cli.stack_name}-wakes")["QueueUrl"]
    variables = {
        **cli.stack.environment(3),
        "SPOOL_QUEUE_URL": cli.stack.spool_queue_url,
        "WAKE_QUEUE_URL": wake_queue_url,
    }
    environment = cli.environment(**variables)
    run_and_count_wakes(lambda: cli.run("rerun", "--restart", stack=False, env=environment), wake_queue_url)
    assert len(queued_jobs(cli)) == 2
