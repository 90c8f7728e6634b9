"""The emulator's shortcuts through moto: the same answers as moto's own way."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.serialize import ResponseSerializer

from dispatcher.local.server import quick_serialize


def _answers() -> list[dict[str, Any]]:
    """Read answers of each service the dispatcher uses, over every kind of DynamoDB value."""
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
    ]
    for answer in answers:
        answer.pop("ResponseMetadata")
    return answers


VOLATILE = ("ReceiptHandle", "MessageId", "SequenceNumber", "Date", "Timestamp", "LastModified")
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
    quick_serialize()
    with mock_aws():
        quick = _answers()
    monkeypatch.setattr(ResponseSerializer, "get_value", ResponseSerializer.get_value.moto)  # type: ignore[attr-defined]
    with mock_aws():
        slow = _answers()
    assert quick[0]["Count"] == 2
    assert quick[0]["Items"][0]["l"]["L"][0]["M"]["at"] == {"N": "3"}
    assert _drop(quick) == _drop(slow)
