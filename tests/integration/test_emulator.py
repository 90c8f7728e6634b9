"""The emulator's shortcuts through moto: the same answers as moto's own way."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.serialize import ResponseSerializer

from dispatcher.local.account import local_client
from dispatcher.local.server import emulated_server, quick_serialize

pytestmark = pytest.mark.traced_libraries
"""What this module measures runs inside moto: traced here (tests/support/tracing.py)."""


def _answers() -> list[dict[str, Any]]:
    """Read answers of each service the dispatcher and its CLI use, over every kind of DynamoDB value."""
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    stepfunctions, ssm = boto3.client("stepfunctions"), boto3.client("ssm")
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    item = {
        "pk": {"S": "p"},
        "n": {"N": "1.5"},
        "b": {"B": b"\x00\xff"},
        "yes": {"BOOL": False},
        "none": {"NULL": True},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2"]},
        "bs": {"BS": [b"x"]},
        "l": {"L": [{"M": {"name": {"S": "e"}, "at": {"N": "3"}}}, {"S": "x"}]},
    }
    for sort_key in ("a", "b"):
        dynamodb.put_item(TableName="t", Item={**item, "sk": {"S": sort_key}})
    queue_url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody="{}",
        MessageGroupId="g",
        MessageDeduplicationId="d",
        MessageAttributes={"ExecutionName": {"DataType": "String", "StringValue": "e"}},
    )
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})
    arn = stepfunctions.create_state_machine(
        name="m", definition=definition, roleArn="arn:aws:iam::123456789012:role/r"
    )["stateMachineArn"]
    stepfunctions.start_execution(stateMachineArn=arn, name="e")
    ssm.put_parameter(Name="/p", Value="{}", Type="String")
    cloudformation = boto3.client("cloudformation")  # the CLI's stack outputs: moto serializes a model object
    template = {"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}, "Outputs": {"QueueUrl": {"Value": "v"}}}
    cloudformation.create_stack(StackName="s", TemplateBody=json.dumps(template))
    answers = [
        dynamodb.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "p"}},
            ConsistentRead=True,
        ),
        dynamodb.get_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "a"}}),
        sqs.receive_message(QueueUrl=queue_url, MessageAttributeNames=["All"], AttributeNames=["All"]),
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"]),
        stepfunctions.list_executions(stateMachineArn=arn),
        stepfunctions.describe_state_machine(stateMachineArn=arn),
        ssm.get_parameter(Name="/p"),
        cloudformation.describe_stacks(StackName="s"),
    ]
    for answer in answers:
        answer.pop("ResponseMetadata")
    return answers


VOLATILE = (
    "ReceiptHandle",
    "MessageId",
    "SequenceNumber",
    "Date",
    "Timestamp",
    "LastModified",
    "StackId",
    "CreationTime",
)
"""What differs between two runs of the same calls: ids, handles and moments."""


def _drop(value: Any) -> Any:
    """``value`` without the volatile keys, at every depth."""
    if isinstance(value, dict):
        return {key: _drop(item) for key, item in value.items() if not any(word in key for word in VOLATILE)}
    if isinstance(value, list):
        return [_drop(item) for item in value]
    return value


def test_moto_answers_the_same_with_the_shortcut_as_without(monkeypatch: pytest.MonkeyPatch) -> None:
    """Query, GetItem, ReceiveMessage, ListExecutions, GetParameter…: the same answers both ways."""
    moto_way = ResponseSerializer.get_value.moto  # type: ignore[attr-defined]
    monkeypatch.setattr(ResponseSerializer, "get_value", moto_way)
    quick_serialize()  # a shortcut with nothing remembered yet: each member is looked up here first
    with mock_aws():
        quick = _answers()
    monkeypatch.setattr(ResponseSerializer, "get_value", moto_way)
    with mock_aws():
        slow = _answers()
    assert quick[0]["Count"] == 2
    assert quick[0]["Items"][0]["l"]["L"][0]["M"]["at"] == {"N": "3"}
    assert _drop(quick) == _drop(slow)


def test_in_the_process_a_long_poll_waits_and_a_described_execution_passes_the_emulation() -> None:
    """The loopback's answers, an empty queue's long poll, `DescribeExecution` through `Emulation`."""
    with emulated_server(execute=False) as (endpoint_url, _):
        sqs = local_client("sqs", endpoint_url)
        queue_url = sqs.create_queue(QueueName="empty")["QueueUrl"]
        began = time.monotonic()
        assert sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1).get("Messages", []) == []
        assert time.monotonic() - began >= 1
        states = local_client("stepfunctions", endpoint_url)
        machine = states.create_state_machine(
            name="waits",
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
            roleArn="arn:aws:iam::123456789012:role/unused",
        )["stateMachineArn"]
        execution = states.start_execution(stateMachineArn=machine, name="one")["executionArn"]
        described = states.describe_execution(executionArn=execution)
        assert (described["name"], described["status"]) == ("one", "RUNNING")
        assert "redriveCount" not in described
