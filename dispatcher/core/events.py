"""The "Step Functions Execution Status Change" event: its name, its model, and what it tells.

The refill rule (every end of an execution) and the failure spool's rule (every failure)
match these events; the template spells the same patterns in YAML, and a test holds the
two to each other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from dispatcher.core.executions import (
    CLOSED_ORDER,
    CLOSED_STATUSES,
    REDRIVABLE_STATUSES,
    execution_name,
    name_problem,
)

STATUS_CHANGE = "Step Functions Execution Status Change"
"""The event's ``detail-type``."""
EVENT_SOURCE = "aws.states"
SQS_EVENT_SOURCE = "aws:sqs"
"""The ``eventSource`` of each record an SQS event source mapping delivers."""
RELEASE_KEY, GATE_KEY = "release", "gate"
"""A release's keys: the execution ARN that leaves a gate, and the gate's name."""
WAKE_KEY = "wake"
"""A wake's key: ``true``, or the name of the lane or gate it wakes (only logged)."""
WAKE_INTERVAL_SECONDS = 1.0
"""A producer wakes at most once in this long: what it queues within it rides on one wake."""
EXECUTION_ARN = re.compile(r"^arn:aws[\w-]*:states:[\w-]+:\d{12}:execution:[^:]+:[^:]+$")


class EndedExecution(BaseModel):
    """An execution a status change event says has ended."""

    model_config = ConfigDict(frozen=True)

    name: str
    stopped_at: float = Field(description="The event's stopDate, in epoch seconds (Step Functions' clock).")
    state_machine_arn: str = Field(default="", description="Whose execution it was (empty: not told).")
    error: str | None = Field(default=None, description="The error it failed with (None: none, or not told).")


class StatusChangeDetail(BaseModel):
    """The `detail` of a status change event (the fields the tick uses)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    state_machine_arn: str = Field(alias="stateMachineArn")
    name: str
    status: str
    stop_date: StrictInt | StrictFloat | None = Field(default=None, alias="stopDate")
    """Epoch milliseconds; absent or null while the execution runs."""
    error: str | None = None
    """The error a FAILED (or TIMED_OUT) execution ended with: an adaptive pool's signal."""


class StatusChangeEvent(BaseModel):
    """A status change event as EventBridge delivers it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    detail_type: str = Field(alias="detail-type", pattern=f"^{STATUS_CHANGE}$")
    time: datetime | None = None
    detail: StatusChangeDetail


StateMachines = str | Collection[str]
"""One state machine's ARN, or several (a bare string is one ARN, never its characters)."""


def _arns(state_machines: StateMachines) -> frozenset[str]:
    return frozenset((state_machines,) if isinstance(state_machines, str) else state_machines)


def ended_execution(event: object, state_machine_arn: StateMachines) -> EndedExecution | None:
    """The execution a status change event says has ended, or None for any other event.

    Only a status change of ``state_machine_arn`` (or one of them) with a closed status counts; anything
    else (another state machine, RUNNING, a malformed event) is an ordinary tick. The
    stop time is ``detail.stopDate``, else the event's ``time``; an event with neither is
    ignored, because without it a redrive after the stop could not be told apart.
    """
    read = _read_end(event, _arns(state_machine_arn))
    return read if isinstance(read, EndedExecution) else None


def _read_end(event: object, state_machine_arns: frozenset[str]) -> EndedExecution | str:
    """The end an event reports, or why it reports none."""
    try:
        change = StatusChangeEvent.model_validate(event)
    except ValidationError:
        return "not a status change event"
    detail = change.detail
    if detail.state_machine_arn not in state_machine_arns:
        return f"a status change of another state machine ({detail.state_machine_arn})"
    if detail.status not in CLOSED_STATUSES:
        return f"status {detail.status} is not an end"
    if name_problem(detail.name) is not None:
        return f"invalid execution name {detail.name!r}"
    if detail.stop_date is not None:
        stopped_at = detail.stop_date / 1000
    elif change.time is not None:
        stopped_at = change.time.timestamp()
    else:
        return "neither detail.stopDate nor time says when it ended"
    return EndedExecution(
        name=detail.name,
        stopped_at=stopped_at,
        state_machine_arn=detail.state_machine_arn,
        error=detail.error or None,
    )


@dataclass(frozen=True)
class Release:
    """An execution says it left a gate's section."""

    gate: str
    execution_arn: str
    sent_at: float
    """When it was sent (the SQS record's SentTimestamp; the invocation's clock for a direct event)."""

    @property
    def name(self) -> str:
        """The execution's name."""
        return execution_name(self.execution_arn)


def is_release(document: object) -> bool:
    """Whether a document means to be a release (it has the ``"release"`` key)."""
    return isinstance(document, dict) and RELEASE_KEY in document


def read_release(document: object, sent_at: float) -> Release | str:
    """The release a document is, or why it isn't one: ``{"release": "<ARN>", "gate": "<name>"}``."""
    if not isinstance(document, dict):
        return "a release must be a JSON object"
    execution, gate = document.get(RELEASE_KEY), document.get(GATE_KEY)
    if not isinstance(execution, str) or not isinstance(gate, str):
        return f'a release needs the strings "{RELEASE_KEY}" (the execution ARN) and "{GATE_KEY}"'
    if not EXECUTION_ARN.match(execution):
        return f"{execution!r} is not an execution ARN"
    return Release(gate, execution, sent_at)


@dataclass(frozen=True)
class Wake:
    """A producer queued jobs and asks for a tick now rather than at the next trigger."""

    member: str | None = None
    """The lane or gate it names (only logged: an unknown one still wakes); None for ``true``."""
    sent_at: float = 0.0
    """When it was sent (the SQS record's SentTimestamp; the invocation's clock for a direct event)."""


def wake_deadline(wakes: Sequence[Wake]) -> float | None:
    """Until when a tick the wakes brought must look for jobs (None: no wake).

    A producer spares the wakes of what it queues within `WAKE_INTERVAL_SECONDS` of its last
    one, so the tick must still receive what was sent until the newest wake's second ended.
    """
    if not wakes:
        return None
    return max(wake.sent_at for wake in wakes) + WAKE_INTERVAL_SECONDS


@dataclass(frozen=True)
class Ask:
    """Other invocations' request to the lease keeper for one more tick, as the keeper takes it."""

    wake_until: float | None = None
    """The newest `wake_deadline` of the asks (None: none came for a wake): what their producers
    queued until then must be received, so the keeper's tick for them that drains before
    then ticks once more when it has passed."""


def is_wake(document: object) -> bool:
    """Whether a document means to be a wake (an object with the ``"wake"`` key and no release)."""
    return isinstance(document, dict) and WAKE_KEY in document and RELEASE_KEY not in document


def read_wake(document: object, sent_at: float = 0.0) -> Wake | str:
    """The wake a document is, or why it isn't one: ``{"wake": true}`` or ``{"wake": "<lane or gate>"}``."""
    value = document.get(WAKE_KEY) if isinstance(document, dict) else None
    if value is True:
        return Wake(sent_at=sent_at)
    if isinstance(value, str) and value:
        return Wake(value, sent_at)
    return f"a wake's {WAKE_KEY!r} must be true or the name of a lane or gate, not {json.dumps(value)}"


@dataclass(frozen=True)
class SkippedRecord:
    """A record of an SQS batch that reports no end of the state machine: logged, never failed."""

    message_id: str
    reason: str


@dataclass(frozen=True)
class EndNews:
    """What one invocation's event says has ended, and which executions say they left a gate."""

    ended: tuple[EndedExecution, ...] = ()
    skipped: tuple[SkippedRecord, ...] = ()
    records: int | None = None
    """The SQS batch's size; None when the event is not an SQS batch."""
    releases: tuple[Release, ...] = ()
    wakes: tuple[Wake, ...] = ()
    """The batch's wakes: they free nothing; the batch's one tick is what they ask for."""


def is_sqs_batch(event: object) -> bool:
    """Whether an SQS event source mapping delivered the event (`Records[]` from ``aws:sqs``)."""
    if not isinstance(event, dict):
        return False
    records = event.get("Records")
    return (
        isinstance(records, list)
        and bool(records)
        and all(
            isinstance(record, dict) and record.get("eventSource") == SQS_EVENT_SOURCE for record in records
        )
    )


def _single_news(event: object, state_machine_arn: StateMachines, now: float) -> EndNews:
    """`end_news` of one event that invoked the function directly (a release, a wake, or a status change)."""
    if is_wake(event):
        wake = read_wake(event, now)
        if isinstance(wake, str):
            return EndNews(skipped=(SkippedRecord("the event", wake),))
        return EndNews(wakes=(wake,))
    if is_release(event):
        release = read_release(event, now)
        if isinstance(release, str):
            return EndNews(skipped=(SkippedRecord("the event", release),))
        return EndNews(releases=(release,))
    single = ended_execution(event, state_machine_arn)
    return EndNews(ended=() if single is None else (single,))


def end_news(event: object, state_machine_arn: StateMachines, now: float = 0.0) -> EndNews:
    """The ends and releases an invocation's event reports: one event, or an SQS batch of them.

    In a batch, every record whose body is a closed status change event of
    ``state_machine_arn`` (or one of them) is an end, and every record whose body is a
    release (``{"release": "<execution ARN>", "gate": "<name>"}``) a release, sent at the
    record's ``SentTimestamp``, and every record whose body is a wake (``{"wake": true}`` or
    ``{"wake": "<lane or gate>"}``) a wake, which frees nothing; any other record (not JSON,
    another state machine, another status, malformed) is skipped with a reason, and the
    others still count. A release invoking the function directly was sent ``now``.
    """
    if not is_sqs_batch(event):
        return _single_news(event, state_machine_arn, now)
    arns = _arns(state_machine_arn)
    records: list[dict[str, Any]] = event["Records"]  # type: ignore[index]  # is_sqs_batch checked it
    ended: list[EndedExecution] = []
    releases: list[Release] = []
    wakes: list[Wake] = []
    skipped: list[SkippedRecord] = []
    for index, record in enumerate(records):
        message_id = str(record.get("messageId", f"record {index}"))
        body = record.get("body")
        try:
            change = json.loads(body) if isinstance(body, str) else None
        except ValueError:
            change = None
        read: EndedExecution | Release | Wake | str
        if is_wake(change):
            read = read_wake(change, _sent_at(record, now))
        elif is_release(change):
            read = read_release(change, _sent_at(record, now))
        else:
            read = "the body is not JSON" if change is None else _read_end(change, arns)
        if isinstance(read, EndedExecution):
            ended.append(read)
        elif isinstance(read, Release):
            releases.append(read)
        elif isinstance(read, Wake):
            wakes.append(read)
        else:
            skipped.append(SkippedRecord(message_id, read))
    return EndNews(
        ended=tuple(ended),
        skipped=tuple(skipped),
        records=len(records),
        releases=tuple(releases),
        wakes=tuple(wakes),
    )


def _sent_at(record: dict[str, Any], now: float) -> float:
    """When SQS received a record's message (its ``SentTimestamp``, epoch milliseconds), else ``now``."""
    attributes = record.get("attributes")
    sent = attributes.get("SentTimestamp") if isinstance(attributes, dict) else None
    try:
        return int(str(sent)) / 1000 if sent is not None else now
    except ValueError:
        return now


def describe_trigger(event: object) -> str:
    """A short label for what invoked the tick; unknown shapes are still a tick."""
    if is_sqs_batch(event):
        return f"a batch of {len(event['Records'])} end event record(s) from SQS"  # type: ignore[index]
    if is_release(event):
        return "a release"
    if is_wake(event):
        return "a wake"
    if isinstance(event, dict):
        detail_type = event.get("detail-type")
        if isinstance(detail_type, str):
            return detail_type
        return "manual or EventBridge Scheduler"
    return f"unrecognised event of type {type(event).__name__}"


def _pattern(state_machines: StateMachines, statuses: frozenset[str]) -> dict[str, Any]:
    arns = [state_machines] if isinstance(state_machines, str) else list(dict.fromkeys(state_machines))
    return {
        "source": [EVENT_SOURCE],
        "detail-type": [STATUS_CHANGE],
        "detail": {
            "stateMachineArn": arns,
            "status": [status for status in CLOSED_ORDER if status in statuses],
        },
    }


def refill_pattern(state_machines: StateMachines) -> dict[str, Any]:
    """The refill rule's event pattern (the template's `CompletionRule`): every end of every machine."""
    return _pattern(state_machines, CLOSED_STATUSES)


def failure_pattern(state_machines: StateMachines) -> dict[str, Any]:
    """The failure spool rule's event pattern (the template's `FailureSpoolRule`): every failure."""
    return _pattern(state_machines, REDRIVABLE_STATUSES)
