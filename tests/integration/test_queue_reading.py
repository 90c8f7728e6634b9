"""`QueueReading`, the re-run commands' way to read a queue, through moto: hold, renew, delete, give back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from dispatcher.adapters.queue_reading import RENEW_MARGIN_SECONDS, QueueReading
from dispatcher.local.account import REGION


@pytest.fixture
def queue() -> Iterator[tuple[Any, str]]:
    """An SQS client and a standard queue, in moto."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="spool")["QueueUrl"]
        for index in range(25):
            sqs.send_message(QueueUrl=url, MessageBody=f"failure {index}")
        yield sqs, url


def visible(sqs: Any, url: str) -> int:
    """How many messages on ``url`` are visible."""
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def test_a_read_holds_every_message_once_and_gives_back_what_it_did_not_delete(
    queue: tuple[Any, str],
) -> None:
    """read_all sees each message once (hidden meanwhile); deleted ones go, the rest are visible again."""
    sqs, url = queue
    held = QueueReading(sqs, url, visibility_seconds=120)
    read = held.read_all()
    assert sorted(message.body for message in read) == sorted(f"failure {index}" for index in range(25))
    assert visible(sqs, url) == 0
    assert held.delete(read[:5]) == []
    held.show_all_again()
    assert visible(sqs, url) == 20
    assert held.held == {}


def test_a_hold_is_renewed_before_it_runs_out(queue: tuple[Any, str]) -> None:
    """keep_hidden renews only the holds that would end within the margin."""
    sqs, url = queue
    clock = {"now": 1000.0}
    renewals: list[int] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibilityBatch",
        lambda params, **_: renewals.append(len(params["Entries"])),
    )
    held = QueueReading(sqs, url, visibility_seconds=300, clock=lambda: clock["now"])
    held.receive()
    held.keep_hidden()
    assert renewals == []
    clock["now"] += 300 - RENEW_MARGIN_SECONDS + 1
    held.keep_hidden()
    assert renewals == [10]
    assert all(message.hidden_until == clock["now"] + 300 for message in held.held.values())


def test_a_message_sqs_would_not_delete_stays_held_and_is_given_back(queue: tuple[Any, str]) -> None:
    """A failed delete entry is reported, and the message is released with the rest, not lost in a hold."""
    sqs, url = queue
    held = QueueReading(sqs, url, visibility_seconds=120)
    batch = held.receive(2)

    def fail_first(parsed: dict[str, Any], **_: Any) -> None:
        parsed["Failed"] = [{"Id": "0", "SenderFault": False, "Code": "InternalError"}]
        parsed["Successful"] = [entry for entry in parsed.get("Successful", []) if entry["Id"] != "0"]

    sqs.meta.events.register("after-call.sqs.DeleteMessageBatch", fail_first)
    assert held.delete(batch) == [batch[0]]
    assert list(held.held) == [batch[0].message_id]
