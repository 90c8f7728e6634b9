"""A producer's wakes against moto: after the jobs, at most one a second, never failing a send."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from dispatcher.local.account import REGION
from dispatcher.local.server import atomic_sqs
from dispatcher.local.stack import read_all
from dispatcher.producer import Job, Producer
from dispatcher.waking import Waker


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        """The time now."""
        return self.now


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """SQS on moto, with no wake queue in the environment."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("WAKE_QUEUE_URL", raising=False)
    atomic_sqs()
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


@pytest.fixture
def queues(sqs: Any) -> tuple[str, str]:
    """The job queue (FIFO) and the wake queue (the end-event queue: standard)."""
    jobs = sqs.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    wakes = sqs.create_queue(QueueName="end-events")["QueueUrl"]
    return str(jobs), str(wakes)


def bodies(sqs: Any, url: str) -> list[Any]:
    """Every message body on a queue, parsed."""
    return [json.loads(message["Body"]) for message in read_all(url, sqs)]


def test_a_send_wakes_once_after_its_job_is_queued(sqs: Any, queues: tuple[str, str]) -> None:
    """The wake is ``{"wake": true}`` on the wake queue, sent once the job is on the job queue."""
    jobs, wakes = queues
    order: list[str] = []
    sqs.meta.events.register("after-call.sqs.*", lambda model, **_: order.append(model.name))
    producer = Producer(jobs, client=sqs, wake_queue_url=wakes)
    producer.send({"order": 1}, group="g")
    assert order == ["SendMessageBatch", "SendMessage"]
    assert bodies(sqs, wakes) == [{"wake": True}]
    assert producer.waker.sent == 1


def test_a_producer_wakes_at_most_once_a_second_however_many_jobs_it_queues(
    sqs: Any, queues: tuple[str, str]
) -> None:
    """Forty jobs in four batches within a second: one wake; a second later, the next send wakes again."""
    jobs, wakes = queues
    clock = Clock()
    producer = Producer(jobs, client=sqs, waker=Waker(sqs, wakes, clock=clock))
    result = producer.send_batch([Job("{}", group=f"g{index}") for index in range(40)])
    assert len(result.sent) == 40
    producer.send("{}", group="g")
    clock.now += 0.99
    producer.send("{}", group="g")
    assert producer.waker.sent == 1
    clock.now += 0.01
    producer.send("{}", group="g")
    assert producer.waker.sent == 2
    assert bodies(sqs, wakes) == [{"wake": True}] * 2


def test_the_wake_queue_comes_from_the_environment_and_an_empty_one_sends_none(
    sqs: Any, queues: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``WAKE_QUEUE_URL`` when no keyword is given; ``wake_queue_url=""`` turns wakes off; none: no wakes."""
    jobs, wakes = queues
    assert Producer(jobs, client=sqs).waker.queue_url is None
    monkeypatch.setenv("WAKE_QUEUE_URL", wakes)
    Producer(jobs, client=sqs).send("{}", group="a")
    Producer(jobs, client=sqs, wake_queue_url="").send("{}", group="b")
    assert bodies(sqs, wakes) == [{"wake": True}]
    assert len(read_all(jobs, sqs)) == 2


def test_a_wake_that_cannot_be_sent_never_fails_the_send_and_is_a_warning(
    sqs: Any, queues: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A wake queue that refuses (here: gone) leaves the job queued; the next trigger starts it."""
    jobs, wakes = queues
    sqs.delete_queue(QueueUrl=wakes)
    producer = Producer(jobs, client=sqs, wake_queue_url=wakes)
    with caplog.at_level(logging.WARNING, logger="dispatcher.waking"):
        message_id = producer.send("{}", group="g")
    assert [message["MessageId"] for message in read_all(jobs, sqs)] == [message_id]
    [warning] = caplog.records
    assert warning.levelname == "WARNING"
    assert warning.getMessage().startswith("could not wake the dispatcher")
    assert "QueueDoesNotExist" in warning.error or "does not exist" in warning.error  # type: ignore[attr-defined]
    assert producer.waker.sent == 0


def test_a_send_that_queues_nothing_wakes_nothing(sqs: Any, queues: tuple[str, str]) -> None:
    """Every job refused before sending: no wake (there is nothing to start)."""
    jobs, wakes = queues
    producer = Producer(jobs, client=sqs, wake_queue_url=wakes)
    result = producer.send_batch([Job("not json", group="g")])
    assert (len(result.sent), len(result.failed)) == (0, 1)
    assert bodies(sqs, wakes) == []


def test_producers_sharing_a_waker_share_its_second(sqs: Any, queues: tuple[str, str]) -> None:
    """Two lanes' producers of one command (``rerun --restart``) wake once a second between them."""
    jobs, wakes = queues
    other = str(sqs.create_queue(QueueName="other.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"])
    waker = Waker(sqs, wakes, clock=Clock())
    Producer(jobs, client=sqs, waker=waker).send("{}", group="g")
    Producer(other, client=sqs, waker=waker).send("{}", group="g")
    assert bodies(sqs, wakes) == [{"wake": True}]
