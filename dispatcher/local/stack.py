"""The dispatcher's resources in the emulator, as the template creates them; helpers to fill and read them."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import boto3

from dispatcher.core.control import Control
from dispatcher.core.messages import (
    DEAD_LETTER_HEADROOM_BYTES,
    EXECUTION_NAME_ATTRIBUTE,
    SQS_MAX_MESSAGE_BYTES,
)
from dispatcher.local.account import ACCOUNT_ID, REGION
from dispatcher.local.workflows import prepare_capacity, sample_workflow
from dispatcher.settings import (
    LANES_OUTPUT,
    LANES_PARAMETER,
    MAX_CONCURRENCY_PARAMETER,
    RELEASE_QUEUE_OUTPUT,
    STACK_OUTPUTS,
    Settings,
)

SPOOL_RETENTION_SECONDS = 14 * 24 * 3600


@dataclass
class StartLog:
    """Every `StartExecution` the dispatcher asked for, in call order, seen from its client."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def hook(self, params: dict[str, Any], **_: Any) -> None:
        """Botocore `provide-client-params` hook: note the call before it is sent."""
        self.calls.append({"name": params.get("name"), "input": params.get("input")})

    def install(self) -> StartLog:
        """Hook boto3's default session, whose clients the handler builds."""
        boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
        if session is None:
            raise RuntimeError("boto3 did not create its default session")
        session.events.register("provide-client-params.states.StartExecution", self.hook)
        return self


@dataclass(frozen=True)
class Stack:
    """The resources one dispatcher needs, as the template creates them."""

    queue_url: str
    dead_letter_queue_url: str
    state_machine_arn: str
    state_table: str
    control_parameter: str
    spool_queue_url: str = ""
    downstream_table: str = ""

    @property
    def name(self) -> str:
        """The stack's name (its queues' prefix)."""
        return self.queue_url.rsplit("/", 1)[-1].removesuffix("-jobs.fifo")

    def settings(self, max_concurrency: int, **overrides: Any) -> Settings:
        """The dispatcher function's settings for this stack; ``overrides`` by field name."""
        fields = {
            "queue_url": self.queue_url,
            "dead_letter_queue_url": self.dead_letter_queue_url,
            "state_machine_arn": self.state_machine_arn,
            "max_concurrency": max_concurrency,
            "state_table": self.state_table,
            "control_parameter": self.control_parameter,
        }
        return Settings.model_validate({**fields, **overrides})

    def environment(self, max_concurrency: int, **overrides: Any) -> dict[str, str]:
        """The dispatcher function's environment for this stack (as the template sets it)."""
        return self.settings(max_concurrency, **overrides).environment()

    def outputs(self, function_name: str = "") -> dict[str, str]:
        """The stack outputs the template declares, for these resources."""
        values = {
            "queue_url": self.queue_url,
            "dead_letter_queue_url": self.dead_letter_queue_url,
            "state_machine_arn": self.state_machine_arn,
            "state_table": self.state_table,
            "control_parameter": self.control_parameter,
            "spool_queue_url": self.spool_queue_url,
            "dispatcher_function_name": function_name,
        }
        return {STACK_OUTPUTS[name]: value for name, value in values.items() if value}


def _pk_sk_table(dynamodb: Any, name: str) -> str:
    """An on-demand table keyed like the state table (``pk``, ``sk``, both strings); its name."""
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def create_stack(  # noqa: PLR0913 — each keyword is a stack option
    prefix: str | None = None,
    *,
    wait_seconds: float = 1,
    state_machine_type: str = "STANDARD",
    max_receive_count: int = 100,
    control: Control | None = None,
    downstream: bool = False,
    slots: bool = False,
) -> Stack:
    """Create queue, DLQ, failure spool, state table, control parameter and a sample workflow.

    Queues and the parameter are named as the template names them for a stack called
    ``prefix`` (``<prefix>-jobs.fifo``, ``<prefix>-dead-letters.fifo``, ``<prefix>-failures``).

    ``control``: the control parameter's first value; None leaves the parameter out
    (the environment's MAX applies), as a stack deployed before it existed.
    ``downstream``: the workflow calls a simulated downstream API (`set_downstream`);
    ``slots``: and takes one of its slots (`set_capacity`).
    """
    prefix = prefix or f"dispatcher-{uuid.uuid4().hex[:8]}"
    sqs = boto3.client("sqs", region_name=REGION)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    stepfunctions = boto3.client("stepfunctions", region_name=REGION)
    queue_url, dead_letter_url = job_queues(sqs, prefix, max_receive_count)
    table = _pk_sk_table(dynamodb, f"{prefix}-state")
    dynamodb.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )
    spool_url = sqs.create_queue(
        QueueName=f"{prefix}-failures",
        Attributes={"MessageRetentionPeriod": str(SPOOL_RETENTION_SECONDS), "SqsManagedSseEnabled": "true"},
    )["QueueUrl"]
    downstream_table = ""
    if downstream:
        downstream_table = _pk_sk_table(dynamodb, f"{prefix}-downstream")
        if slots:
            prepare_capacity(downstream_table)
    state_machine_arn = stepfunctions.create_state_machine(
        name=workflow_name(prefix),
        definition=sample_workflow(wait_seconds, downstream_table or None, slots=slots),
        roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/{prefix}-workflow",
        type=state_machine_type,  # type: ignore[arg-type]
    )["stateMachineArn"]
    parameter = f"/{prefix}/dispatcher/control"
    if control is not None:
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name=parameter, Value=control.as_json(), Type="String"
        )
    return Stack(queue_url, dead_letter_url, state_machine_arn, table, parameter, spool_url, downstream_table)


def job_queues(sqs: Any, prefix: str, max_receive_count: int) -> tuple[str, str]:
    """A job queue ``<prefix>-jobs.fifo`` and its dead-letter queue, as the template makes them."""
    return fifo_queues(sqs, f"{prefix}-jobs.fifo", f"{prefix}-dead-letters.fifo", max_receive_count)


def fifo_queues(sqs: Any, name: str, dead_letter_name: str, max_receive_count: int = 100) -> tuple[str, str]:
    """A FIFO job queue and its FIFO dead-letter queue of these names, as the template makes them."""
    fifo: dict[Any, str] = {"FifoQueue": "true", "SqsManagedSseEnabled": "true"}
    dead_letter_url = sqs.create_queue(
        QueueName=dead_letter_name,
        Attributes={**fifo, "MaximumMessageSize": str(SQS_MAX_MESSAGE_BYTES)},
    )["QueueUrl"]
    dead_letter_arn = sqs.get_queue_attributes(QueueUrl=dead_letter_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    queue_url = sqs.create_queue(
        QueueName=name,
        Attributes={
            **fifo,
            "MaximumMessageSize": str(SQS_MAX_MESSAGE_BYTES - DEAD_LETTER_HEADROOM_BYTES),
            "ContentBasedDeduplication": "true",
            "VisibilityTimeout": "120",
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": max_receive_count}
            ),
        },
    )["QueueUrl"]
    return queue_url, dead_letter_url


def create_lane(
    stack: str, name: str, *, state_machine_arn: str | None = None, wait_seconds: float = 1, **options: Any
) -> dict[str, Any]:
    """Create a lane's queues (``<stack>-<name>-jobs.fifo``) and, unless given, its own sample workflow.

    Returns the lane's entry of ``LANES`` (``options``: ``pool``, ``priority``,
    ``max_concurrency``, ``starts_per_second``).
    """
    queue_url, dead_letter_url = job_queues(boto3.client("sqs", region_name=REGION), f"{stack}-{name}", 100)
    if state_machine_arn is None:
        state_machine_arn = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
            name=workflow_name(f"{stack}-{name}"),
            definition=sample_workflow(wait_seconds),
            roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/{stack}-workflow",
        )["stateMachineArn"]
    return {
        "name": name,
        "queue_url": queue_url,
        "dead_letter_queue_url": dead_letter_url,
        "state_machine_arn": state_machine_arn,
        **options,
    }


def read_all(queue_url: str, sqs: Any = None) -> list[dict[str, Any]]:
    """Every message on a queue, with all attributes, deleting each once read.

    Deleting matters on a FIFO queue: a group's later messages are held back while
    an earlier one is in flight. ``sqs`` is the client to read with (a new one by default).
    """
    sqs = sqs or boto3.client("sqs", region_name=REGION)
    found: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return found
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        found.extend(messages)


def send_jobs(queue_url: str, jobs: list[dict[str, Any]]) -> list[str]:
    """Send jobs one by one (FIFO order is send order); return their MessageIds."""
    sqs = boto3.client("sqs", region_name=REGION)
    ids = []
    for job in jobs:
        request: dict[str, Any] = {
            "QueueUrl": queue_url,
            "MessageBody": job["body"],
            "MessageGroupId": job["group"],
            "MessageDeduplicationId": job.get("dedup", uuid.uuid4().hex),
        }
        if "name" in job:
            name = {"DataType": "String", "StringValue": job["name"]}
            request["MessageAttributes"] = {EXECUTION_NAME_ATTRIBUTE: name}
        ids.append(sqs.send_message(**request)["MessageId"])
    return ids


def workflow_name(stack: str) -> str:
    """The sample workflow's state machine in stack ``stack``."""
    return f"{stack}-workflow"


def function_name(stack: str) -> str:
    """The emulated dispatcher function of stack ``stack`` (named as SAM names it, less the suffix)."""
    return f"{stack}-DispatcherFunction"


def register_stack(  # noqa: PLR0913 — each keyword is one output of the stack
    name: str,
    stack: Stack,
    max_concurrency: int,
    *,
    function: str = "",
    lanes: str = "",
    release_queue_url: str = "",
    wake_queue_url: str = "",
) -> None:
    """A CloudFormation stack in the emulator: the control parameter, and the template's outputs.

    ``function``: the name of an emulated dispatcher function, for `tick --invoke`.
    ``lanes``: the stack's Lanes parameter and its ``LanesDocument`` output (``LANES``).
    ``release_queue_url``: where gated workflows send their releases (its ``ReleaseQueueUrl``).
    ``wake_queue_url``: where producers wake the ticks (its ``WakeQueueUrl``; empty: no wakes).
    """
    outputs = stack.outputs(function)
    if lanes:
        outputs[LANES_OUTPUT] = lanes
    if release_queue_url:
        outputs[RELEASE_QUEUE_OUTPUT] = release_queue_url
    if wake_queue_url:
        outputs[STACK_OUTPUTS["wake_queue_url"]] = wake_queue_url
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "dispatcher (local emulator)",
        "Parameters": {
            MAX_CONCURRENCY_PARAMETER: {"Type": "Number", "Default": max_concurrency},
            LANES_PARAMETER: {"Type": "String", "Default": ""},
        },
        "Resources": {
            "ControlParameter": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {
                    "Name": stack.control_parameter,
                    "Type": "String",
                    "Value": Control(max_concurrency=max_concurrency, paused=False).as_json(),
                },
            }
        },
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName=name,
        TemplateBody=json.dumps(template),
        Parameters=[
            {"ParameterKey": MAX_CONCURRENCY_PARAMETER, "ParameterValue": str(max_concurrency)},
            {"ParameterKey": LANES_PARAMETER, "ParameterValue": lanes},
        ],
    )
