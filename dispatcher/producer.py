"""The producer client: send jobs to the dispatcher's queue the way it expects them.

    from dispatcher.producer import Job, Producer

    producer = Producer(queue_url)
    producer.send('{"order": 42}', group="customer-7", name="order-42")
    result = producer.send_batch([Job('{"order": 43}', group="customer-7"), ...])
    for failure in result.failed:
        print(failure.job, failure.reason)

Every job is checked with the rules the dispatcher applies when it receives it (one
source: `dispatcher.planning`), so a job that could never start is refused here, not
dead-lettered later. Every message carries an explicit ``MessageDeduplicationId``
(the execution name when there is one), so sending works whether the queue's
content-based deduplication is on or off, and a retry is never a second job.

Order: a batch holds at most one job per message group, and a group's next job is sent
only once the one before it is on the queue. A job that still can't be sent fails the
group's later jobs of that call too, so the queue never holds them out of order.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.aws_errors import translate
from dispatcher.adapters.sqs import SQS_MAX_BATCH
from dispatcher.errors import DispatcherError, TransientError
from dispatcher.planning import (
    DISPATCH_ACTION_ATTRIBUTE,
    EXECUTION_NAME_ATTRIBUTE,
    REDRIVE_ACTION,
    REDRIVE_COUNT_ATTRIBUTE,
    job_problem,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

__all__ = ["Failure", "Job", "JobRejectedError", "Producer", "SendFailedError", "SendResult", "Sent"]

BATCH_PAYLOAD_LIMIT = 262_144
"""SendMessageBatch's total payload limit on every queue (larger single jobs go alone)."""
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5}, user_agent_extra="dispatcher-producer"
)


@dataclass(frozen=True)
class Job:
    """One job: the execution input (a JSON string), its message group, and optionally its name."""

    body: str
    group: str
    name: str | None = None
    """The execution name; without one, the message's SQS MessageId becomes the name."""
    deduplication_id: str | None = None
    """Defaults to the name, else a random id kept across this call's retries."""
    redrive_count: int | None = None
    """Set: not a new start but "redrive execution ``name``", whose ``redriveCount`` is this now."""

    def problem(self) -> str | None:
        """Why the dispatcher would never start this job, or None."""
        if self.redrive_count is not None and (self.name is None or self.redrive_count < 0):
            return "a redrive job needs the execution's name and its redriveCount (>= 0)"
        return job_problem(self.body, self.group, self.name)

    def attributes(self) -> dict[str, dict[str, str]]:
        """The message attributes that carry the name and, for a redrive, the action."""
        attributes: dict[str, dict[str, str]] = {}
        if self.name is not None:
            attributes[EXECUTION_NAME_ATTRIBUTE] = {"DataType": "String", "StringValue": self.name}
        if self.redrive_count is not None:
            attributes[DISPATCH_ACTION_ATTRIBUTE] = {"DataType": "String", "StringValue": REDRIVE_ACTION}
            attributes[REDRIVE_COUNT_ATTRIBUTE] = {
                "DataType": "Number",
                "StringValue": str(self.redrive_count),
            }
        return attributes

    def payload_bytes(self) -> int:
        """What the job counts towards a batch's payload limit."""
        attributes = sum(
            len(key) + len(value["DataType"]) + len(value["StringValue"].encode())
            for key, value in self.attributes().items()
        )
        return len(self.body.encode("utf-8", errors="replace")) + attributes


@dataclass(frozen=True)
class Sent:
    """A job now on the queue."""

    job: Job
    message_id: str


@dataclass(frozen=True)
class Failure:
    """A job that is not on the queue, and why."""

    job: Job
    reason: str


@dataclass
class SendResult:
    """What one call sent and what it could not, each in the order given."""

    sent: list[Sent] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every job is on the queue."""
        return not self.failed


class JobRejectedError(DispatcherError, ValueError):
    """The job breaks a rule the dispatcher applies (body, size, group or name): it was not sent."""


class SendFailedError(DispatcherError):
    """SQS did not take the job, after retries."""


@dataclass(eq=False)
class _Pending:
    job: Job
    deduplication_id: str
    attempts: int = 0
    gave_up: str | None = None
    """Why it won't be tried again."""


class Producer:
    """Sends jobs to one dispatcher queue (thread-safe as its boto3 client is)."""

    def __init__(
        self,
        queue_url: str,
        *,
        client: SQSClient | None = None,
        attempts: int = 3,
        backoff_seconds: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``attempts``: tries per failed batch entry (botocore retries whole calls by itself)."""
        self.queue_url = queue_url
        self._client = client or boto3.client("sqs", config=CLIENT_CONFIG)
        self._attempts = attempts
        self._backoff_seconds = backoff_seconds
        self._sleep = sleep

    def send(
        self, body: str, *, group: str, name: str | None = None, deduplication_id: str | None = None
    ) -> str:
        """Send one job; its MessageId. Raises ``JobRejectedError`` or ``SendFailedError``."""
        job = Job(body, group, name, deduplication_id)
        problem = job.problem()
        if problem is not None:
            raise JobRejectedError(problem)
        result = self.send_batch([job])
        if result.failed:
            raise SendFailedError(result.failed[0].reason)
        return result.sent[0].message_id

    def send_batch(
        self, jobs: Iterable[Job], *, progress: Callable[[SendResult], None] | None = None
    ) -> SendResult:
        """Send jobs with SendMessageBatch, in order within each group; report each job's fate.

        ``progress`` is called after every batch with the result so far.
        """
        result = SendResult()
        groups: OrderedDict[str, deque[_Pending]] = OrderedDict()
        for job in jobs:
            problem = job.problem()
            if problem is not None:
                result.failed.append(Failure(job, problem))
                continue
            deduplication_id = job.deduplication_id or job.name or uuid.uuid4().hex
            groups.setdefault(job.group, deque()).append(_Pending(job, deduplication_id))
        while groups:
            batch = self._next_batch(groups)
            unsent = self._send(batch, result)
            for pending in batch:
                if pending in unsent:
                    continue
                queue = groups[pending.job.group]
                queue.popleft()
                if not queue:
                    del groups[pending.job.group]
            retry = [pending for pending in unsent if pending.gave_up is None]
            if retry:
                self._sleep(self._backoff_seconds * 2 ** (max(item.attempts for item in retry) - 1))
            self._fail_given_up(groups, result)
            if progress is not None:
                progress(result)
        return result

    @staticmethod
    def _next_batch(groups: OrderedDict[str, deque[_Pending]]) -> list[_Pending]:
        """The head of up to ten groups, within the payload limit (a larger job goes alone)."""
        batch: list[_Pending] = []
        size = 0
        for queue in groups.values():
            head = queue[0]
            if batch and size + head.job.payload_bytes() > BATCH_PAYLOAD_LIMIT:
                continue
            batch.append(head)
            size += head.job.payload_bytes()
            if len(batch) == SQS_MAX_BATCH:
                break
        return batch

    def _send(self, batch: list[_Pending], result: SendResult) -> list[_Pending]:
        """One SendMessageBatch; the entries not sent (to try again, or given up with a reason)."""
        entries = [self._entry(str(index), pending) for index, pending in enumerate(batch)]
        for pending in batch:
            pending.attempts += 1
        try:
            response = self._client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
        except (ClientError, BotoCoreError) as error:
            translated = translate(error, "SendMessageBatch")
            for pending in batch:
                if not isinstance(translated, TransientError) or pending.attempts >= self._attempts:
                    pending.gave_up = str(translated)
            return list(batch)
        for success in response.get("Successful", []):
            result.sent.append(Sent(batch[int(success["Id"])].job, success["MessageId"]))
        unsent: list[_Pending] = []
        for failure in response.get("Failed", []):
            pending = batch[int(failure["Id"])]
            if failure.get("SenderFault") or pending.attempts >= self._attempts:
                pending.gave_up = f"{failure.get('Code', 'error')}: {failure.get('Message', '')}"
            unsent.append(pending)
        return unsent

    def _entry(self, entry_id: str, pending: _Pending) -> SendMessageBatchRequestEntryTypeDef:
        job = pending.job
        entry: dict[str, Any] = {
            "Id": entry_id,
            "MessageBody": job.body,
            "MessageGroupId": job.group,
            "MessageDeduplicationId": pending.deduplication_id,
        }
        attributes = job.attributes()
        if attributes:
            entry["MessageAttributes"] = attributes
        return entry  # type: ignore[return-value]  # the keys above are the TypedDict's

    def _fail_given_up(self, groups: OrderedDict[str, deque[_Pending]], result: SendResult) -> None:
        """A group whose head gave up fails as a whole: its later jobs must not overtake it."""
        for group, queue in list(groups.items()):
            head = queue[0]
            if head.gave_up is None:
                continue
            result.failed.append(Failure(head.job, head.gave_up))
            result.failed += [
                Failure(later.job, f"not sent: an earlier job of group {group!r} could not be sent")
                for later in list(queue)[1:]
            ]
            del groups[group]
