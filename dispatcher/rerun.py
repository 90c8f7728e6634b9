"""Re-run what failed, through the cap: the failure spool, and the dead-letter queue.

The failure spool is an SQS queue that an EventBridge rule fills with the status change
event of every execution that FAILED, TIMED_OUT or was ABORTED. ``dispatcher rerun``
turns each spooled failure into a job on the dispatcher's own queue, so every re-run
waits for a free slot like any other job:

- ``restart``: a new execution with the same input, under a derived name (the same
  for every attempt at one failure, so a re-run queued twice starts once), in the
  job's original message group (from the state table's start record);
- ``redrive``: a job with ``DispatchAction`` ``redrive`` and the execution's current
  ``redriveCount``; the dispatcher continues the same execution from its failed state.

A spool message is deleted only once its re-run job is on the queue; a crash in between
leaves it to come back, and the job it queues again is the same job (the same
deduplication id and name). Nothing here starts an execution.

Dead letters go back to the job queue unchanged but for their ``DispatchError``,
one message group in send order, with a deduplication id that makes the move
idempotent.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.aws_errors import translate
from dispatcher.adapters.sqs import SQS_MAX_BATCH
from dispatcher.adapters.stepfunctions import ExecutionState
from dispatcher.errors import DispatcherError
from dispatcher.planning import (
    EXECUTION_NAME_ATTRIBUTE,
    MAX_NAME_LENGTH,
    REDRIVABLE_STATUSES,
    chunks,
    group_problem,
)
from dispatcher.producer import Job

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

DISPATCH_ERROR_ATTRIBUTE = "DispatchError"
STATUS_CHANGE = "Step Functions Execution Status Change"
READ_VISIBILITY_SECONDS = 300
"""How long a read hides spool or dead-letter messages from other readers (renewed while working)."""
RENEW_MARGIN_SECONDS = 60.0
READ_WAIT_SECONDS = 1
"""Each receive long-polls this long: an empty short poll may miss messages on other SQS hosts."""
REDRIVE_WINDOW_SECONDS = 14 * 24 * 3600
RERUN_SUFFIX = re.compile(r"-rerun-[0-9a-f]{8}$")
RESTART = "restart"
REDRIVE = "redrive"


# -- spooled failures -----------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """One execution that failed, as its status change event tells."""

    execution_arn: str
    name: str
    status: str
    error: str | None
    cause: str | None
    started_at: float
    stopped_at: float
    input: str | None
    """None when the event left it out (input and output above 248 KiB)."""
    redrive_count: int

    def as_json(self) -> dict[str, Any]:
        """The failure for ``--json``."""
        return {
            "name": self.name,
            "execution_arn": self.execution_arn,
            "status": self.status,
            "error": self.error,
            "cause": self.cause,
            "started_at": _iso(self.started_at),
            "stopped_at": _iso(self.stopped_at),
            "redrive_count": self.redrive_count,
        }


def parse_failure(body: str) -> Failure | None:
    """The failure a spooled status change event reports, or None for anything else."""
    try:
        event = json.loads(body)
        detail = event["detail"]
        if event.get("detail-type") != STATUS_CHANGE or detail["status"] not in REDRIVABLE_STATUSES:
            return None
        execution_input = detail.get("input")
        return Failure(
            execution_arn=str(detail["executionArn"]),
            name=str(detail["name"]),
            status=str(detail["status"]),
            error=detail.get("error"),
            cause=detail.get("cause"),
            started_at=float(detail["startDate"]) / 1000,
            stopped_at=float(detail["stopDate"]) / 1000,
            input=execution_input if isinstance(execution_input, str) else None,
            redrive_count=int(detail.get("redriveCount") or 0),
        )
    except (ValueError, TypeError, KeyError):
        return None


@dataclass(eq=False)
class Held:
    """A message this command received and holds (hidden from others) until it deletes or releases it."""

    message_id: str
    receipt_handle: str
    body: str
    hidden_until: float
    attributes: dict[str, Any] = field(default_factory=dict)
    system: dict[str, str] = field(default_factory=dict)


class HeldQueue:
    """Reads a whole queue, holding what it read until each message is deleted or released.

    SQS can't show a message without receiving it: a read hides messages for a while
    (renewed while this command still works on them) and gives back every one it did
    not delete, on success, on error and on Ctrl-C.
    """

    def __init__(
        self,
        client: SQSClient,
        url: str,
        *,
        visibility_seconds: int = READ_VISIBILITY_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self.url = url
        self._visibility = visibility_seconds
        self._clock = clock
        self.held: dict[str, Held] = {}

    def receive(self, count: int = SQS_MAX_BATCH) -> list[Held]:
        """Receive up to ``count`` more messages (at most 10), holding them."""
        try:
            response = self._client.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=max(1, min(SQS_MAX_BATCH, count)),
                VisibilityTimeout=self._visibility,
                WaitTimeSeconds=READ_WAIT_SECONDS,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            )
        except (ClientError, BotoCoreError) as error:
            raise translate(error, f"ReceiveMessage on {self.url}") from error
        hidden_until = self._clock() + self._visibility
        received = []
        for raw in response.get("Messages", []):
            held = Held(
                message_id=raw["MessageId"],
                receipt_handle=raw["ReceiptHandle"],
                body=raw.get("Body", ""),
                hidden_until=hidden_until,
                attributes=dict(raw.get("MessageAttributes", {})),
                system={str(key): str(value) for key, value in raw.get("Attributes", {}).items()},
            )
            self.held[held.message_id] = held
            received.append(held)
        return received

    def read_all(self, progress: Callable[[int], None] | None = None) -> list[Held]:
        """Receive until the queue shows nothing more; every message read, in receive order."""
        read: dict[str, Held] = {}
        while True:
            self.keep_hidden()
            batch = self.receive()
            if not batch:
                return list(read.values())
            # A message whose hold ran out while reading comes again: it is listed once.
            read.update((held.message_id, held) for held in batch)
            if progress is not None:
                progress(len(read))

    def keep_hidden(self) -> None:
        """Renew the hold on every message that would reappear soon."""
        now = self._clock()
        due = [held for held in self.held.values() if held.hidden_until - now < RENEW_MARGIN_SECONDS]
        for batch in chunks(due, SQS_MAX_BATCH):
            self._change_visibility(batch, self._visibility)
            for held in batch:
                held.hidden_until = now + self._visibility

    def delete(self, messages: Sequence[Held]) -> list[Held]:
        """Delete messages; those SQS did not delete (they will come back)."""
        failed: list[Held] = []
        for batch in chunks(list(messages), SQS_MAX_BATCH):
            entries = [
                {"Id": str(index), "ReceiptHandle": held.receipt_handle} for index, held in enumerate(batch)
            ]
            try:
                response = self._client.delete_message_batch(QueueUrl=self.url, Entries=entries)  # type: ignore[arg-type]
            except (ClientError, BotoCoreError) as error:
                raise translate(error, f"DeleteMessageBatch on {self.url}") from error
            undeleted = [batch[int(entry["Id"])] for entry in response.get("Failed", [])]
            failed += undeleted
            for held in batch:
                if held not in undeleted:  # still held: given back with the rest
                    self.held.pop(held.message_id, None)
        return failed

    def release_all(self) -> None:
        """Give back every message still held (visible again at once). Best effort."""
        held = list(self.held.values())
        self.held.clear()
        for batch in chunks(held, SQS_MAX_BATCH):
            with contextlib.suppress(DispatcherError):  # they reappear when their hold runs out
                self._change_visibility(batch, 0)

    def _change_visibility(self, batch: Sequence[Held], seconds: int) -> None:
        entries = [
            {"Id": str(index), "ReceiptHandle": held.receipt_handle, "VisibilityTimeout": seconds}
            for index, held in enumerate(batch)
        ]
        try:
            self._client.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)  # type: ignore[arg-type]
        except (ClientError, BotoCoreError) as error:
            raise translate(error, f"ChangeMessageVisibilityBatch on {self.url}") from error

    def depth(self) -> int:
        """About how many messages the queue holds (visible and in flight)."""
        try:
            attributes = self._client.get_queue_attributes(
                QueueUrl=self.url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
        except (ClientError, BotoCoreError) as error:
            raise translate(error, f"GetQueueAttributes on {self.url}") from error
        return int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
            attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
        )


@dataclass(frozen=True)
class Filters:
    """Which spooled failures a command looks at."""

    statuses: frozenset[str] = REDRIVABLE_STATUSES
    error: str | None = None
    """A glob on the error name (``States.*``)."""
    name: str | None = None
    """A glob on the execution name."""
    since: float | None = None
    until: float | None = None
    """Stop time bounds (epoch seconds), inclusive."""

    def keep(self, failure: Failure) -> bool:
        """Whether ``failure`` passes every filter."""
        return (
            failure.status in self.statuses
            and (self.error is None or fnmatch.fnmatchcase(failure.error or "", self.error))
            and (self.name is None or fnmatch.fnmatchcase(failure.name, self.name))
            and (self.since is None or failure.stopped_at >= self.since)
            and (self.until is None or failure.stopped_at <= self.until)
        )


@dataclass
class Spooled:
    """One failed execution and the spool messages that report it (events repeat)."""

    failure: Failure
    messages: list[Held]


def by_execution(messages: Iterable[Held]) -> tuple[list[Spooled], list[Held]]:
    """Spool messages grouped by execution (its latest failure), oldest start first; and the unreadable."""
    found: dict[str, Spooled] = {}
    unreadable: list[Held] = []
    for held in messages:
        failure = parse_failure(held.body)
        if failure is None:
            unreadable.append(held)
            continue
        spooled = found.get(failure.execution_arn)
        if spooled is None:
            found[failure.execution_arn] = Spooled(failure, [held])
            continue
        spooled.messages.append(held)
        latest = (failure.redrive_count, failure.stopped_at)
        if latest > (spooled.failure.redrive_count, spooled.failure.stopped_at):
            spooled.failure = failure
    return sorted(found.values(), key=lambda item: (item.failure.started_at, item.failure.name)), unreadable


def counts(failures: Iterable[Failure]) -> dict[str, dict[str, int]]:
    """How many failures per status and per error."""
    by_status: dict[str, int] = {}
    by_error: dict[str, int] = {}
    for failure in failures:
        by_status[failure.status] = by_status.get(failure.status, 0) + 1
        error = failure.error or "(none)"
        by_error[error] = by_error.get(error, 0) + 1
    return {"status": dict(sorted(by_status.items())), "error": dict(sorted(by_error.items()))}


# -- planning a re-run ------------------------------------------------------------------


def restart_name(name: str, execution_arn: str) -> str:
    """The derived name of a restart: the base name, ``-rerun-`` and 8 hex digits of the failed ARN.

    The same failure always derives the same name (a re-run queued twice starts once);
    a restart of a restart replaces the suffix rather than growing it, and the name
    stays within 80 characters.
    """
    suffix = f"-rerun-{hashlib.sha256(execution_arn.encode()).hexdigest()[:8]}"
    base = RERUN_SUFFIX.sub("", name)[: MAX_NAME_LENGTH - len(suffix)]
    return base + suffix


def state_machine_of(execution_arn: str) -> str:
    """The state machine ARN of an execution ARN (``...:execution:<machine>:<name>``)."""
    prefix, _, rest = execution_arn.partition(":execution:")
    machine = rest.rsplit(":", 1)[0] if ":" in rest else rest
    return f"{prefix}:stateMachine:{machine}"


def default_group(execution_arn: str) -> str:
    """The message group of a re-run whose original group is unknown: one of its own."""
    return f"rerun-{hashlib.sha256(execution_arn.encode()).hexdigest()[:16]}"


@dataclass
class Rerun:
    """What ``rerun`` does with one failed execution."""

    spooled: Spooled
    mode: str
    job: Job | None = None
    group_source: str = ""
    """recorded (the state table), option (``--group``) or default (a group of its own)."""
    skip: str | None = None
    """Why nothing is queued."""
    resolved: bool = False
    """Skipped because nothing is left to do: its spool messages go."""
    redrive_count: int = 0
    """The execution's redriveCount now: which failure of it this re-run is for."""

    def as_json(self) -> dict[str, Any]:
        """The plan for ``--json``."""
        document: dict[str, Any] = {"name": self.spooled.failure.name, "mode": self.mode}
        if self.job is not None:
            document |= {
                "job_name": self.job.name,
                "group": self.job.group,
                "group_source": self.group_source,
                "deduplication_id": self.job.deduplication_id,
            }
            if self.job.redrive_count is not None:
                document["redrive_count"] = self.job.redrive_count
        if self.skip is not None:
            document["skipped"] = self.skip
        return document


def plan_rerun(  # noqa: PLR0911 — one answer per state the execution can be in
    spooled: Spooled, mode: str, state: ExecutionState | None, group: tuple[str, str], now: float
) -> Rerun:
    """Decide one re-run from what Step Functions says of the execution now.

    ``group``: the message group and where it came from. An execution redriven since
    that runs again or succeeded has nothing left to re-run; one that a lagging read
    doesn't show failed yet is left for a later run. A redrive takes the execution's
    current ``redriveCount`` (what the dispatcher checks before it redrives).
    """
    failure = spooled.failure
    rerun = Rerun(
        spooled,
        mode,
        group_source=group[1],
        redrive_count=failure.redrive_count if state is None else state.redrive_count,
    )
    if (
        state is not None
        and state.redrive_count > failure.redrive_count
        and state.status not in REDRIVABLE_STATUSES
    ):
        rerun.skip, rerun.resolved = f"{state.status} since: redriven after this failure", True
        return rerun
    if state is not None and (
        state.redrive_count < failure.redrive_count or state.status not in REDRIVABLE_STATUSES
    ):
        # DescribeExecution is eventually consistent: it may not show the failure yet.
        rerun.skip = f"Step Functions still shows it {state.status}: run this again in a minute"
        return rerun
    execution_input = (state.input if state is not None else None) or failure.input
    if mode == REDRIVE:
        if state is None:
            rerun.skip = "Step Functions no longer has this execution: use --restart"
            return rerun
        if now - failure.stopped_at > REDRIVE_WINDOW_SECONDS:
            rerun.skip = "stopped more than 14 days ago, too late to redrive: use --restart"
            return rerun
        digest = hashlib.sha256(failure.execution_arn.encode()).hexdigest()[:32]
        rerun.job = Job(
            body=execution_input or "{}",
            group=group[0],
            name=failure.name,
            deduplication_id=f"redrive-{state.redrive_count}-{digest}",
            redrive_count=state.redrive_count,
        )
        return rerun
    if execution_input is None:
        rerun.skip = "its input is not available (left out of the event, and not readable)"
        return rerun
    name = restart_name(failure.name, failure.execution_arn)
    rerun.job = Job(body=execution_input, group=group[0], name=name, deduplication_id=name)
    return rerun


def choose_group(execution_arn: str, recorded: str | None, option: str | None) -> tuple[str, str]:
    """The re-run's message group and its source: ``--group``, else the recorded one, else its own."""
    if option is not None:
        return option, "option"
    if recorded is not None and group_problem(recorded) is None:
        return recorded, "recorded"
    return default_group(execution_arn), "default"


# -- dead letters ---------------------------------------------------------------------


@dataclass(frozen=True)
class DeadLetterMove:
    """How one dead letter goes back to the job queue."""

    held: Held
    group: str
    attributes: dict[str, dict[str, str]]
    deduplication_id: str
    reason: str | None

    def as_json(self) -> dict[str, Any]:
        """The dead letter for ``--json``."""
        name = self.attributes.get(EXECUTION_NAME_ATTRIBUTE, {}).get("StringValue")
        return {
            "message_id": self.held.message_id,
            "group": self.group,
            "name": name,
            "reason": self.reason,
            "sent_at": _iso(float(self.held.system.get("SentTimestamp", 0)) / 1000),
            "body": self.held.body,
        }


def plan_move(held: Held) -> DeadLetterMove:
    """The job-queue copy of a dead letter: same body, group and attributes but ``DispatchError``.

    The deduplication id is the id of the job-queue message that was dead-lettered
    (the DLQ copy's own deduplication id, by the dispatcher's contract; a message SQS
    moved itself keeps its MessageId), so moving twice within SQS's five minutes sends
    once. A message without ``ExecutionName`` gets that same id as its name, the name
    it would have started under, so even a later duplicate never starts twice.
    """
    reason_value = held.attributes.get(DISPATCH_ERROR_ATTRIBUTE)
    reason = None if reason_value is None else str(reason_value.get("StringValue", ""))
    original = held.system.get("MessageDeduplicationId") if reason is not None else None
    original = original or held.message_id
    attributes: dict[str, dict[str, str]] = {}
    for key, value in held.attributes.items():
        if key == DISPATCH_ERROR_ATTRIBUTE or "StringValue" not in value:
            continue
        attributes[key] = {"DataType": str(value["DataType"]), "StringValue": str(value["StringValue"])}
    attributes.setdefault(EXECUTION_NAME_ATTRIBUTE, {"DataType": "String", "StringValue": original})
    return DeadLetterMove(
        held=held,
        group=held.system.get("MessageGroupId", ""),
        attributes=attributes,
        deduplication_id=original,
        reason=reason,
    )


def reasons(moves: Iterable[DeadLetterMove]) -> dict[str, int]:
    """How many dead letters per reason."""
    found: dict[str, int] = {}
    for move in moves:
        key = move.reason or "(moved by SQS: maxReceiveCount)"
        found[key] = found.get(key, 0) + 1
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))


class Pace:
    """At most ``rate`` actions per second (None: no limit)."""

    def __init__(
        self,
        rate: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._interval = 0.0 if not rate else 1.0 / rate
        self._clock = clock
        self._sleep = sleep
        self._next = 0.0

    def wait(self) -> None:
        """Sleep until the next action may happen."""
        now = self._clock()
        if self._next > now:
            self._sleep(self._next - now)
            now = self._next
        self._next = now + self._interval


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))
