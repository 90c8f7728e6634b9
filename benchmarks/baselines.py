"""The two baselines the dispatcher is measured against, written as people write them.

- **naive**: a re-processing script. Receive one message, start its execution, delete
  it; one at a time. It counts nothing, so it has no cap at all.
- **list-only**: a dispatcher without the state table or refill on completion. Each
  tick pages through every RUNNING execution, receives up to ``MAX - N`` messages in
  batches of 10, starts them one by one and deletes them in batches. It caps only as
  well as `ListExecutions` is current.

Both use boto3's standard retry mode, like the dispatcher, and a user agent the
emulator's wire recognises, so they pay the same simulated latency.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config


def client(service: str, system: str) -> Any:
    """A boto3 client of a baseline, marked for the wire."""
    return boto3.client(
        service,
        config=Config(
            retries={"mode": "standard", "max_attempts": 4}, user_agent_extra=f"dispatcher bench-{system}"
        ),
    )


def naive_loop(queue_url: str, state_machine_arn: str, *, until: Callable[[], bool]) -> int:
    """Receive one, start, delete, until the queue is empty or ``until()``; return the starts."""
    sqs, sfn = client("sqs", "naive"), client("stepfunctions", "naive")
    started = 0
    while not until():
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1).get("Messages", [])
        if not messages:
            return started
        [message] = messages
        sfn.start_execution(
            stateMachineArn=state_machine_arn, name=message["MessageId"], input=message["Body"]
        )
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        started += 1
    return started


def running_by_paging(sfn: Any, state_machine_arn: str) -> int:
    """Every RUNNING execution, page by page, as `get_paginator("list_executions")` reads them."""
    pages = sfn.get_paginator("list_executions").paginate(
        stateMachineArn=state_machine_arn, statusFilter="RUNNING", PaginationConfig={"PageSize": 1000}
    )
    return sum(len(page["executions"]) for page in pages)


def list_only_tick(
    queue_url: str, state_machine_arn: str, max_concurrency: int, *, until: Callable[[], bool]
) -> int:
    """One tick of the list-only dispatcher; return the starts."""
    sqs, sfn = client("sqs", "list-only"), client("stepfunctions", "list-only")
    free = max_concurrency - running_by_paging(sfn, state_machine_arn)
    started = 0
    while free > started and not until():
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=min(10, free - started)).get(
            "Messages", []
        )
        if not messages:
            break
        for message in messages:
            sfn.start_execution(
                stateMachineArn=state_machine_arn, name=message["MessageId"], input=message["Body"]
            )
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(index), "ReceiptHandle": m["ReceiptHandle"]} for index, m in enumerate(messages)
            ],
        )
        started += len(messages)
    return started


def deadline(seconds: float) -> Callable[[], bool]:
    """A stop condition that turns true ``seconds`` from now."""
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end
