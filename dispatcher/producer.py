"""The producer client: send jobs to the dispatcher's queue the way it expects them.

    from dispatcher.producer import Job, Producer

    producer = Producer(queue_url)
    producer.send({"order": 42}, group="customer-7", name="order-42")
    result = producer.send_batch([Job('{"order": 43}', group="customer-7"), ...])
    for failure in result.failed:
        print(failure.job, failure.reason)

A body is JSON text, sent verbatim, or a value such as a dict, sent as its JSON text.
Every job is checked with the rules the dispatcher applies when it receives it (one
source: `dispatcher.core.messages`), so a job that could never start is refused here, not
dead-lettered later. Every message carries an explicit ``MessageDeduplicationId``
(derived from the execution name and the body when there is a name), so sending works
whether the queue's content-based deduplication is on or off, a retry is never a second
job, and a different job sent under a name already used reaches the queue (where the
dispatcher dead-letters it as a name collision) instead of being dropped by SQS.

Waking: after queueing jobs, a producer with a wake queue (the keyword argument
``wake_queue_url``, else the variable ``WAKE_QUEUE_URL``; the stack's ``WakeQueueUrl``)
sends the dispatcher a wake, at most one a second, so a job sent to a quiet dispatcher
starts in seconds; a wake that can't be sent never fails the send (``dispatcher.waking``).

Order: a batch holds at most one job per message group, and a group's next job is sent
only once the one before it is on the queue. A job that still can't be sent fails the
group's later jobs of that call too, so the queue never holds them out of order.

Following and cancelling (``job``, ``cancel``, ``cancel_group``) need more than the queue:
the state table, the lanes and the state machines. They come from the constructor's
keyword arguments, else from the function's own environment variables (``STATE_TABLE``,
``STATE_MACHINE_ARN``, ``DEAD_LETTER_QUEUE_URL``, ``LANES``, ``CONTROL_PARAMETER``), so
``Producer(queue_url)`` in a process with the function's environment can do both:

    producer.send({"order": 42}, group="customer-7", name="order-42", start_by=deadline)
    producer.job("order-42").state           # "not started", "running", "cancelled", ...
    producer.cancel("order-42", reason="upload deleted")   # "cancelled", or raises
    producer.cancel_group("customer-7", reason="tenant left")
"""

from __future__ import annotations

import os
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from dispatcher.adapters.errors import error_code, error_message, translated
from dispatcher.core.batching import SQS_BATCH_LIMIT
from dispatcher.core.errors import DispatcherError, TransientError
from dispatcher.core.jobs import JobReport, start_by_text
from dispatcher.core.messages import Job
from dispatcher.following import CANCELLED, Jobs, jobs_from_settings
from dispatcher.settings import LANES_OUTPUT, LANES_PARAMETER, STACK_OUTPUTS
from dispatcher.waking import WAKE_QUEUE_VARIABLE, Waker

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import BatchResultErrorEntryTypeDef, SendMessageBatchRequestEntryTypeDef

__all__ = [
    "AlreadyStartedError",
    "Failure",
    "Job",
    "JobRejectedError",
    "Producer",
    "SendFailedError",
    "SendResult",
    "Sent",
]


def _lane_queue(stack: str, lane: str, default_queue_url: str, settings: Mapping[str, str | None]) -> str:
    """Lane ``lane``'s queue, from the stack's ``LANES``; a ``ValueError`` for one it hasn't."""
    jobs = jobs_from_settings(default_queue_url, settings)
    try:
        return jobs.lane(lane).queue_url
    except ValueError as error:
        raise ValueError(f"stack {stack}: {error}") from error


FOLLOW_SETTINGS = ("state_table", "state_machine_arn", "dead_letter_queue_url", "lanes", "control_parameter")
"""What following and cancelling need beyond the queue (the function's variables, in lower case)."""
BATCH_PAYLOAD_LIMIT = 262_144
"""SendMessageBatch's total payload limit on every queue (larger single jobs go alone)."""
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5}, user_agent_extra="dispatcher-producer"
)


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


class AlreadyStartedError(DispatcherError):
    """``cancel`` came too late: the job's execution exists (its ARN and status are in the message)."""


@dataclass(eq=False)
class _Pending:
    job: Job
    deduplication_id: str
    attempts: int = 0
    gave_up: str | None = None
    """Why it won't be tried again."""


class Producer:
    """Sends jobs to one dispatcher queue (thread-safe as its boto3 client is)."""

    def __init__(  # noqa: PLR0913 — each keyword is an option of the client
        self,
        queue_url: str,
        *,
        client: SQSClient | None = None,
        attempts: int = 3,
        backoff_seconds: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
        wake_queue_url: str | None = None,
        waker: Waker | None = None,
        **settings: str | None,
    ) -> None:
        """``attempts``: tries per failed batch entry (botocore retries whole calls by itself).

        ``wake_queue_url``: where to wake the dispatcher after queueing (None: the variable
        ``WAKE_QUEUE_URL``; empty, or neither: no wakes). ``waker``: one shared with other
        producers, so that together they wake at most once a second (it wins over
        ``wake_queue_url``).
        ``settings``: what following and cancelling need beyond the queue, by the function's
        variable names in lower case (``state_table``, ``state_machine_arn``,
        ``dead_letter_queue_url``, ``lanes``, ``control_parameter``); each one not given
        comes from the environment.
        """
        self.queue_url = queue_url
        self._client = client or boto3.client("sqs", config=CLIENT_CONFIG)
        if waker is None:
            wake_url = os.environ.get(WAKE_QUEUE_VARIABLE) if wake_queue_url is None else wake_queue_url
            waker = Waker(self._client, wake_url)
        self.waker = waker
        self._attempts = attempts
        self._backoff_seconds = backoff_seconds
        self._sleep = sleep
        self._settings = {key: value for key, value in settings.items() if value is not None}
        self._jobs: Jobs | None = None

    @classmethod
    def from_stack(
        cls,
        stack: str,
        *,
        lane: str | None = None,
        cloudformation: CloudFormationClient | None = None,
        **options: Any,
    ) -> Producer:
        """A producer of a deployed stack, as the CLI's ``--stack``: its job queue (or lane ``lane``'s).

        Following and cancelling take the stack's outputs (state table, state machine,
        dead-letter queue, control parameter, ``LANES``), so nothing is copied by hand.
        ``options``: the constructor's (``client``, ``attempts``, ...). A stack that doesn't
        exist, isn't a dispatcher's, or has no such lane is a ``ValueError`` naming it.
        """
        client = cloudformation or boto3.client("cloudformation", config=CLIENT_CONFIG)
        try:
            [found] = client.describe_stacks(StackName=stack)["Stacks"]
        except ClientError as error:
            if error_code(error) != "ValidationError":
                raise
            raise ValueError(
                f"stack {stack} not found in {client.meta.region_name}: {error_message(error)}"
            ) from error
        outputs = {output["OutputKey"]: output["OutputValue"] for output in found.get("Outputs", [])}
        parameters = {
            item["ParameterKey"]: item.get("ParameterValue") for item in found.get("Parameters", [])
        }
        queue_url = outputs.get(STACK_OUTPUTS["queue_url"])
        if not queue_url:
            raise ValueError(
                f"stack {stack} has no {STACK_OUTPUTS['queue_url']} output: is it a dispatcher stack?"
            )
        settings: dict[str, Any] = {
            key: outputs.get(STACK_OUTPUTS[key]) for key in FOLLOW_SETTINGS if key in STACK_OUTPUTS
        }
        settings["lanes"] = outputs.get(LANES_OUTPUT) or parameters.get(LANES_PARAMETER) or None
        if lane is not None:
            queue_url = _lane_queue(stack, lane, queue_url, settings)
        options.setdefault("wake_queue_url", outputs.get(STACK_OUTPUTS["wake_queue_url"]) or "")
        return cls(queue_url, **settings, **options)

    def send(  # noqa: PLR0913 — each is one of the job's own fields
        self,
        body: str | Mapping[str, Any] | Sequence[Any],
        *,
        group: str,
        name: str | None = None,
        deduplication_id: str | None = None,
        start_by: datetime | str | None = None,
        slots: int | None = None,
    ) -> str:
        """Send one job; its MessageId. Raises ``JobRejectedError`` or ``SendFailedError``.

        ``body``: JSON text (sent verbatim) or a value such as a dict (sent as its JSON text).
        ``start_by``: an aware datetime (or ISO 8601 text with a UTC offset) after which the job
        must not start (it expires); one that has passed already is refused. ``slots``: how many
        of its pool's slots the job takes (its ``Slots`` attribute; None: one, no attribute).
        """
        try:
            deadline = None if start_by is None else start_by_text(start_by)
        except ValueError as error:
            raise JobRejectedError(str(error)) from error
        job = Job(body, group, name, deduplication_id, start_by=deadline, slots=slots)  # type: ignore[arg-type]
        problem = job.problem(time.time())
        if problem is not None:
            raise JobRejectedError(problem)
        result = self.send_batch([job])
        if result.failed:
            raise SendFailedError(result.failed[0].reason)
        return result.sent[0].message_id

    def job(self, name: str, lane: str | None = None) -> JobReport:
        """Where job ``name`` of the lane (default: ``default``) is: its ``state`` and what is known of it.

        ``as_json()`` gives the fields of ``dispatcher job --json``.
        """
        return self._following().job(name, lane)

    def cancel(
        self, name: str, lane: str | None = None, reason: str | None = None, stop: bool = False
    ) -> str:
        """Cancel job ``name``: ``"cancelled"`` (it never starts) or ``"stopped"`` (with ``stop``).

        Raises ``AlreadyStartedError`` when its execution exists (and was not stopped).
        """
        answer = self._following().cancel(name, lane, reason, stop=stop)
        if answer.execution is not None and answer.word != "stopped":
            execution = answer.execution
            raise AlreadyStartedError(f"already started: {name} is {execution.status} ({execution.arn})")
        return answer.word

    def cancel_group(self, group: str, lane: str | None = None, reason: str | None = None) -> str:
        """Cancel group ``group``'s jobs sent until now, not started (a tenant leaves): ``"cancelled"``."""
        self._following().cancel_group(group, lane, reason)
        return CANCELLED

    def _following(self) -> Jobs:
        """The dispatcher's jobs, built on first use."""
        if self._jobs is None:
            settings = {
                key: self._settings.get(key) or os.environ.get(key.upper()) for key in FOLLOW_SETTINGS
            }
            self._jobs = jobs_from_settings(self.queue_url, settings)
        return self._jobs

    def send_batch(
        self, jobs: Iterable[Job], *, progress: Callable[[SendResult], None] | None = None
    ) -> SendResult:
        """Send jobs with SendMessageBatch, in order within each group; report each job's fate.

        ``progress`` is called after every batch with the result so far. Once jobs are on
        the queue, each batch that sent some wakes the dispatcher (at most once a second).
        """
        result = SendResult()
        groups: OrderedDict[str, deque[_Pending]] = OrderedDict()
        for job in jobs:
            problem = job.problem(time.time())
            if problem is not None:
                result.failed.append(Failure(job, problem))
                continue
            deduplication_id = job.message_deduplication_id() or uuid.uuid4().hex
            groups.setdefault(job.group, deque()).append(_Pending(job, deduplication_id))
        while groups:
            batch = self._next_batch(groups)
            before = len(result.sent)
            unsent = self._send(batch, result)
            if len(result.sent) > before:
                self.waker.wake()
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
            if len(batch) == SQS_BATCH_LIMIT:
                break
        return batch

    def _send(self, batch: list[_Pending], result: SendResult) -> list[_Pending]:
        """One SendMessageBatch; the entries not sent (to try again, or given up with a reason)."""
        entries = [self._entry(str(index), pending) for index, pending in enumerate(batch)]
        for pending in batch:
            pending.attempts += 1
        try:
            with translated("SendMessageBatch"):
                response = self._client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
        except (DispatcherError, ClientError) as error:
            for pending in batch:
                if not isinstance(error, TransientError) or pending.attempts >= self._attempts:
                    pending.gave_up = str(error)
            return list(batch)
        for success in response.get("Successful", []):
            result.sent.append(Sent(batch[int(success["Id"])].job, success["MessageId"]))
        return [self._not_sent(batch[int(failure["Id"])], failure) for failure in response.get("Failed", [])]

    def _not_sent(self, pending: _Pending, failure: BatchResultErrorEntryTypeDef) -> _Pending:
        """An entry SQS refused: given up on when the fault is the sender's, or its attempts are spent."""
        if failure.get("SenderFault") or pending.attempts >= self._attempts:
            pending.gave_up = f"{failure.get('Code', 'error')}: {failure.get('Message', '')}"
        return pending

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
