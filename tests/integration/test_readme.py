"""The producer snippets of the README and docs/producers.md run as printed, against moto, as they say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import boto3
from moto import mock_aws

README = Path(__file__).parents[2] / "README.md"
PRODUCERS_PAGE = Path(__file__).parents[2] / "docs" / "producers.md"


def test_the_readme_producer_snippet_sends_three_jobs_in_one_group() -> None:
    """The snippet, run as is on a queue of the name it uses, puts its three jobs on the queue in order."""
    [snippet] = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="dispatcher-jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(snippet, {})  # noqa: S102 — the README's own example
        messages = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )["Messages"]
    assert printed.getvalue() == ""  # nothing failed
    assert [message["Body"] for message in messages] == [
        '{"partition": "2026-11-19"}',
        '{"partition": "2026-11-20"}',
        '{"partition": "2026-11-21"}',
    ]
    assert {message["Attributes"]["MessageGroupId"] for message in messages} == {"orders"}
    assert messages[0]["MessageAttributes"]["ExecutionName"]["StringValue"] == "orders-2026-11-19"


def test_the_producers_page_snippets_send_each_job_once_and_agree_on_its_deduplication_id() -> None:
    """The client's snippet sends three jobs; the boto3 one re-sends the first under the same id: one kept.

    The boto3 snippet then wakes the dispatcher: one ``{"wake": true}`` on the wake queue.
    """
    client_snippet, boto3_snippet = re.findall(r"```python\n(.*?)```", PRODUCERS_PAGE.read_text(), re.DOTALL)
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="dispatcher-jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        wake_url = sqs.create_queue(QueueName="dispatcher-end-events")["QueueUrl"]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(client_snippet, {})  # noqa: S102 — the page's own examples
            exec(boto3_snippet, {})  # noqa: S102
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])[
            "Messages"
        ]
        wakes = sqs.receive_message(QueueUrl=wake_url, MaxNumberOfMessages=10)["Messages"]
    assert [wake["Body"] for wake in wakes] == ['{"wake": true}']
    assert printed.getvalue() == ""  # nothing failed
    assert [message["MessageAttributes"]["ExecutionName"]["StringValue"] for message in messages] == [
        "orders-2026-11-21",
        "orders-2026-11-22",
        "orders-2026-11-23",
    ]
    assert messages[0]["Body"] == '{"table": "orders", "partition": "2026-11-21"}'


DEPLOY_PAGE = PRODUCERS_PAGE.parent / "deploy-and-local.md"


def test_the_migration_snippet_sends_the_job_that_start_execution_would_have_started() -> None:
    """The deploy page's 'after' sends the 'before' call's input as the body, under its name."""
    [snippet] = re.findall(r"```python\n(.*?)```", DEPLOY_PAGE.read_text(), re.DOTALL)
    snippet = "\n".join(line.removeprefix("   ") for line in snippet.splitlines())
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="dispatcher-jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        exec(snippet, {})  # noqa: S102 — the page's own example
        [message] = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert message["Body"] == '{"partition": "2026-11-19"}'
    assert message["MessageAttributes"]["ExecutionName"]["StringValue"] == "orders-2026-11-19"
