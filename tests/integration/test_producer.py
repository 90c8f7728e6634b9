"""The producer client against moto: batches, retries with the same deduplication id, group order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from dispatcher.core.executions import MAX_INPUT_BYTES
from dispatcher.core.messages import deduplication_id
from dispatcher.local.account import REGION
from dispatcher.local.server import atomic_sqs
from dispatcher.local.stack import read_all
from dispatcher.producer import BATCH_PAYLOAD_LIMIT, Job, JobRejectedError, Producer, SendFailedError


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An SQS client in moto, with test credentials."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    atomic_sqs()
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


@pytest.fixture
def queue_url(sqs: Any) -> str:
    """A FIFO queue that takes 1 MiB messages."""
    return str(
        sqs.create_queue(
            QueueName="jobs.fifo", Attributes={"FifoQueue": "true", "MaximumMessageSize": "1048576"}
        )["QueueUrl"]
    )


class EntryFailures:
    """Fail chosen batch entries as SQS can (the rest of the call really is sent), and log every call."""

    def __init__(
        self, sqs: Any, fail: dict[str, int], code: str = "InternalError", sender: bool = False
    ) -> None:
        self.fail = dict(fail)  # body -> how many more times to fail it
        self.code, self.sender = code, sender
        self.calls: list[list[dict[str, Any]]] = []
        self._held: list[dict[str, Any]] = []
        self._empty = False
        sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", self._before)
        sqs.meta.events.register("before-call.sqs.SendMessageBatch", self._short_circuit)
        sqs.meta.events.register("after-call.sqs.SendMessageBatch", self._after)

    def _before(self, params: dict[str, Any], **_: Any) -> None:
        self.calls.append([dict(entry) for entry in params["Entries"]])
        self._held = [entry for entry in params["Entries"] if self.fail.get(entry["MessageBody"], 0) > 0]
        for entry in self._held:
            self.fail[entry["MessageBody"]] -= 1
        params["Entries"] = [entry for entry in params["Entries"] if entry not in self._held]
        self._empty = not params["Entries"]

    def _short_circuit(self, **_: Any) -> Any:
        """Every entry failed: answer without sending (SQS would refuse an empty batch)."""
        if not self._empty:
            return None
        return SimpleNamespace(status_code=200, headers={}), {"Successful": []}

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        parsed.setdefault("Failed", []).extend(
            {"Id": entry["Id"], "Code": self.code, "Message": "injected", "SenderFault": self.sender}
            for entry in self._held
        )


def test_producer_sends_one_job_with_a_deduplication_id_of_name_and_body(sqs: Any, queue_url: str) -> None:
    """`send` puts the body verbatim with the ExecutionName attribute and a dedup id of name and body."""
    message_id = Producer(queue_url, client=sqs).send('{"order":  42}', group="c7", name="order-42")
    [message] = read_all(queue_url, sqs)
    assert message["MessageId"] == message_id
    assert message["Body"] == '{"order":  42}'
    assert message["MessageAttributes"]["ExecutionName"]["StringValue"] == "order-42"
    assert message["Attributes"]["MessageDeduplicationId"] == deduplication_id("order-42", '{"order":  42}')


def test_producer_same_name_and_body_twice_is_one_message(sqs: Any, queue_url: str) -> None:
    """A re-send of the same job (same name, same body) within SQS's window is deduplicated: one message."""
    producer = Producer(queue_url, client=sqs)
    for _ in range(2):
        producer.send('{"order": 42}', group="c7", name="order-42")
    assert len(read_all(queue_url, sqs)) == 1


def test_producer_same_name_with_another_body_reaches_the_queue(sqs: Any, queue_url: str) -> None:
    """A different job under a name already sent is not dropped by deduplication: both are on the queue."""
    producer = Producer(queue_url, client=sqs)
    producer.send('{"order": 42}', group="c7", name="order-42")
    producer.send('{"order": 43}', group="c7", name="order-42")
    assert [message["Body"] for message in read_all(queue_url, sqs)] == ['{"order": 42}', '{"order": 43}']


def test_producer_takes_a_dict_as_its_json_text(sqs: Any, queue_url: str) -> None:
    """`send` with a dict sends its JSON text (what most callers hold), not an AttributeError."""
    Producer(queue_url, client=sqs).send({"order": 42, "café": True}, group="c7", name="order-42")
    [message] = read_all(queue_url, sqs)
    assert json.loads(message["Body"]) == {"order": 42, "café": True}


@pytest.mark.parametrize(
    ("body", "problem"),
    [({"when": object()}, "not dict: Object of type object"), ({"x": float("nan")}, "Out of range float")],
    ids=["not-serialisable", "nan"],
)
def test_producer_refuses_a_body_that_cannot_be_json_and_says_what_it_takes(
    sqs: Any, queue_url: str, body: Any, problem: str
) -> None:
    """A body json.dumps can't write is refused with what a body may be; nothing is sent."""
    takes = r"JSON text \(str\) or a value json.dumps can write"
    with pytest.raises(JobRejectedError, match=takes) as raised:
        Producer(queue_url, client=sqs).send(body, group="c7")
    assert problem in str(raised.value)
    assert read_all(queue_url, sqs) == []


@pytest.mark.parametrize(
    ("job", "problem"),
    [
        (Job("{broken", "g"), "not valid JSON"),
        (Job(json.dumps({"x": "y" * MAX_INPUT_BYTES}), "g"), "larger than"),
        (Job("{}", ""), "message group id"),
        (Job("{}", "has space"), "printable ASCII"),
        (Job("{}", "g", "a/b"), "forbidden character"),
        (Job("{}", "g", "n" * 81), "longer than 80"),
    ],
    ids=["json", "size", "empty-group", "group-space", "name-char", "name-length"],
)
def test_producer_refuses_what_the_dispatcher_would_dead_letter(
    sqs: Any, queue_url: str, job: Job, problem: str
) -> None:
    """The dispatcher's own rules refuse a job before it is sent; nothing reaches the queue."""
    with pytest.raises(JobRejectedError, match=problem):
        Producer(queue_url, client=sqs).send(job.body, group=job.group, name=job.name)
    assert read_all(queue_url, sqs) == []


def test_producer_batches_ten_groups_per_call(sqs: Any, queue_url: str) -> None:
    """25 jobs of 25 groups take 3 SendMessageBatch calls."""
    failures = EntryFailures(sqs, {})
    result = Producer(queue_url, client=sqs).send_batch(Job("{}", f"g{index}") for index in range(25))
    assert result.ok
    assert [len(call) for call in failures.calls] == [10, 10, 5]
    assert len(read_all(queue_url, sqs)) == 25


def test_producer_batch_respects_the_payload_limit(sqs: Any, queue_url: str) -> None:
    """Large jobs share a call only while the batch stays within 256 KiB."""
    failures = EntryFailures(sqs, {})
    body = json.dumps({"pad": "x" * (BATCH_PAYLOAD_LIMIT // 3)})
    result = Producer(queue_url, client=sqs).send_batch(Job(body, f"g{index}") for index in range(4))
    assert result.ok
    assert [len(call) for call in failures.calls] == [2, 2]


def test_producer_retries_a_failed_entry_with_the_same_deduplication_id(sqs: Any, queue_url: str) -> None:
    """An entry SQS failed (not the sender's fault) is sent again under its first dedup id; it lands once."""
    failures = EntryFailures(sqs, {'{"n": 1}': 1})
    result = Producer(queue_url, client=sqs, sleep=lambda _: None).send_batch(
        [Job('{"n": 1}', "a"), Job('{"n": 2}', "b")]
    )
    assert result.ok
    first, retry = failures.calls
    assert retry[0]["MessageDeduplicationId"] == first[0]["MessageDeduplicationId"]
    assert sorted(message["Body"] for message in read_all(queue_url, sqs)) == ['{"n": 1}', '{"n": 2}']


def test_producer_keeps_group_order_when_an_entry_is_retried(sqs: Any, queue_url: str) -> None:
    """A group's next job waits until the failed one is on the queue: send order is kept."""
    EntryFailures(sqs, {'{"n": 1}': 2})
    jobs = [Job(json.dumps({"n": index}), "a") for index in range(1, 4)]
    result = Producer(queue_url, client=sqs, sleep=lambda _: None).send_batch(jobs)
    assert result.ok
    assert [message["Body"] for message in read_all(queue_url, sqs)] == [job.body for job in jobs]


def test_producer_gives_up_and_fails_the_rest_of_the_group(sqs: Any, queue_url: str) -> None:
    """After its attempts, a job fails, and so do its group's later jobs; other groups are sent."""
    EntryFailures(sqs, {'{"n": 1}': 5})
    jobs = [Job('{"n": 1}', "a"), Job('{"n": 2}', "a"), Job('{"n": 3}', "b")]
    result = Producer(queue_url, client=sqs, attempts=3, sleep=lambda _: None).send_batch(jobs)
    assert [sent.job.body for sent in result.sent] == ['{"n": 3}']
    assert [(failure.job.body, failure.reason) for failure in result.failed] == [
        ('{"n": 1}', "InternalError: injected"),
        ('{"n": 2}', "not sent: an earlier job of group 'a' could not be sent"),
    ]
    assert [message["Body"] for message in read_all(queue_url, sqs)] == ['{"n": 3}']


def test_producer_sender_fault_is_not_retried(sqs: Any, queue_url: str) -> None:
    """An entry refused as the sender's fault fails at once, with SQS's reason."""
    failures = EntryFailures(sqs, {'{"n": 1}': 5}, code="InvalidParameterValue", sender=True)
    with pytest.raises(SendFailedError, match="InvalidParameterValue"):
        Producer(queue_url, client=sqs, sleep=lambda _: None).send('{"n": 1}', group="a")
    assert len(failures.calls) == 1


def test_producer_missing_queue_fails_every_job_with_the_reason(sqs: Any) -> None:
    """A call SQS refuses as a whole (no such queue) fails each job with that reason, no retry loop."""
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/missing.fifo"
    result = Producer(url, client=sqs, sleep=lambda _: None).send_batch([Job("{}", "a"), Job("{}", "b")])
    assert result.sent == []
    assert len(result.failed) == 2
    assert all("SendMessageBatch failed" in failure.reason for failure in result.failed)


def test_producer_throttled_call_is_retried_then_reported(sqs: Any, queue_url: str) -> None:
    """A call still throttled after botocore's retries is one attempt; after the last, each job fails."""
    calls = {"count": 0}

    def throttle(**_: Any) -> None:
        calls["count"] += 1
        raise ClientError(
            {
                "Error": {"Code": "RequestThrottled", "Message": "slow down"},
                "ResponseMetadata": {"HTTPStatusCode": 403},
            },
            "SendMessageBatch",
        )

    sqs.meta.events.register("before-call.sqs.SendMessageBatch", throttle)
    result = Producer(queue_url, client=sqs, attempts=2, sleep=lambda _: None).send_batch([Job("{}", "a")])
    assert calls["count"] == 2
    assert [failure.reason for failure in result.failed] == [
        "SendMessageBatch failed with RequestThrottled: slow down"
    ]
