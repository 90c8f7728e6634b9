"""The suite's shortcuts through moto (tests/support/quick_moto.py): moto's own answers, sooner."""

from __future__ import annotations

import string
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models.table import Table

from tests.support.quick_moto import RECEIPT_HANDLE_LENGTH


def _pages(dynamodb: Any, **request: Any) -> list[dict[str, Any]]:
    """Every page of one `Query`, without the request ids."""
    pages = []
    while True:
        page = dynamodb.query(**request)
        page.pop("ResponseMetadata")
        pages.append(page)
        if "LastEvaluatedKey" not in page:
            return pages
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _queries() -> list[list[dict[str, Any]]]:
    """Queries of three partitions, of an index and of a table without a sort key."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "kind", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-kind",
                "KeySchema": [{"AttributeName": "kind", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.create_table(
        TableName="single",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for partition in ("b", "a", "c"):
        for index in (7, 3, 11, 5, 1):
            item = {"pk": {"S": partition}, "sk": {"S": f"{index:03}"}, "kind": {"S": f"k{index % 2}"}}
            dynamodb.put_item(TableName="t", Item={**item, "n": {"N": str(index)}})
        dynamodb.put_item(TableName="single", Item={"pk": {"S": partition}, "n": {"N": "1"}})
    own_key = {"TableName": "t", "KeyConditionExpression": "pk = :p"}
    return [
        _pages(dynamodb, **own_key, ExpressionAttributeValues={":p": {"S": "a"}}),
        _pages(dynamodb, **own_key, ExpressionAttributeValues={":p": {"S": "b"}}, ScanIndexForward=False),
        _pages(dynamodb, **own_key, ExpressionAttributeValues={":p": {"S": "c"}}, Limit=2),
        _pages(
            dynamodb,
            TableName="t",
            KeyConditionExpression="pk = :p AND sk > :s",
            FilterExpression="n > :n",
            ExpressionAttributeValues={":p": {"S": "a"}, ":s": {"S": "002"}, ":n": {"N": "4"}},
        ),
        _pages(dynamodb, **own_key, ExpressionAttributeValues={":p": {"S": "none"}}),
        _pages(
            dynamodb,
            TableName="t",
            IndexName="by-kind",
            KeyConditionExpression="kind = :k",
            ExpressionAttributeValues={":k": {"S": "k1"}},
        ),
        _pages(
            dynamodb,
            TableName="single",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "b"}},
        ),
        [dynamodb.scan(TableName="t")["Items"]],
    ]


def test_a_query_on_the_tables_own_key_answers_as_moto_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forward, backward, in pages, filtered, an empty partition, an index, no sort key: moto's answers."""
    with mock_aws():
        quick = _queries()
    monkeypatch.setattr(Table, "query", Table.query.moto)  # type: ignore[attr-defined]
    with mock_aws():
        slow = _queries()
    assert [item["n"]["N"] for page in quick[0] for item in page["Items"]] == ["1", "3", "5", "7", "11"]
    assert len(quick[2]) == 3  # five items, two a page: three pages
    assert quick == slow


def test_receipt_handles_are_moto_s_185_lowercase_letters_and_each_one_new() -> None:
    """Each message a receive hands out gets a handle of its own, in moto's alphabet and length."""
    with mock_aws():
        sqs = boto3.client("sqs")
        queue_url = sqs.create_queue(QueueName="q")["QueueUrl"]
        for index in range(10):
            sqs.send_message(QueueUrl=queue_url, MessageBody=str(index))
        handles = [
            message["ReceiptHandle"]
            for message in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
        ]
    assert len(handles) == 10
    assert len(set(handles)) == 10
    assert all(
        len(handle) == RECEIPT_HANDLE_LENGTH and set(handle) <= set(string.ascii_lowercase)
        for handle in handles
    )
