"""Name cancellations packed by lane and hour, on moto behind the fault middleware (DynamoDB's 400 KB)."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from dispatcher.adapters.job_items import NAME_SHARDS, cancels_partition, pending_names_key
from dispatcher.adapters.jobs import JobTable
from dispatcher.adapters.state_items import read_pending
from dispatcher.core.jobs import JobRecord, JobState
from dispatcher.local.account import REGION
from dispatcher.local.stack import _pk_sk_table
from tests.support.faulty_aws import ITEM_SIZE_LIMIT, FaultyAws

KEY = "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"
AT = 1_795_000_000.0
"""Within one hour (1,795,000,000 is 1,100 s into its hour)."""


def _size(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB (and moto) count it."""
    return int(Item(DynamoType(item["pk"]), DynamoType(item["sk"]), item).size())


def _pending(dynamodb: object, table: str) -> list[dict[str, object]]:
    answer = dynamodb.query(  # type: ignore[attr-defined]
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :cancel)",
        ExpressionAttributeValues={":pk": {"S": cancels_partition(KEY)}, ":cancel": {"S": "~cancel#"}},
        ConsistentRead=True,
    )
    return list(answer["Items"])


def test_an_hours_names_share_its_items_and_a_full_one_gives_a_name_its_own(faulty_aws: FaultyAws) -> None:
    """12 names of one hour: at most 4 items, each name with its moment; a full item; a withdrawal."""
    assert faulty_aws is not None
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    table = _pk_sk_table(dynamodb, f"state-{uuid.uuid4().hex[:8]}")
    jobs = JobTable(dynamodb, table, KEY)
    for index in range(12):
        jobs.cancel(JobRecord("default", f"job-{index}", JobState.CANCELLED, "upload deleted", AT + index))
    items = _pending(dynamodb, table)
    assert 1 <= len(items) <= NAME_SHARDS
    assert {item["sk"]["S"].split("#")[2] for item in items} == {"h"}  # type: ignore[index]
    pending = read_pending(items)["default"]  # type: ignore[arg-type]
    assert pending.names == {f"job-{index}" for index in range(12)}
    assert pending.cancelled_at["job-3"] == AT + 3
    assert jobs.record("default", "job-3") is not None, "its record, as before"

    # The shard that "big" falls in, filled to within 40 bytes of DynamoDB's 400 KB (moto counts):
    # its cancellation gets an item of its own.
    sort_key = pending_names_key("default", "big", AT)
    kept = next((item for item in items if item["sk"]["S"] == sort_key), None)  # type: ignore[index]
    item = {
        "pk": {"S": cancels_partition(KEY)},
        "sk": {"S": sort_key},
        "kind": {"S": "cancel"},
        "names": {"M": dict({} if kept is None else kept["names"]["M"])},  # type: ignore[index]
    }
    base = _size(item)
    pad = "x" * 9_980  # few names, each long: the item's size without thousands of entries to build
    item["names"]["M"][f"filler-00{pad}"] = {"N": "1"}
    each = _size(item) - base  # every filler-NN name below is as long
    for filler in range(1, (ITEM_SIZE_LIMIT - 40 - base) // each):
        item["names"]["M"][f"filler-{filler:02d}{pad}"] = {"N": "1"}
    assert ITEM_SIZE_LIMIT - 40 - each <= _size(item) <= ITEM_SIZE_LIMIT - 40
    fill = ITEM_SIZE_LIMIT - 40 - _size(item) - len("filler-zz") - 2  # to within 40 bytes
    item["names"]["M"]["filler-zz" + "x" * max(0, fill)] = {"N": "1"}
    assert ITEM_SIZE_LIMIT - 50 <= _size(item) <= ITEM_SIZE_LIMIT - 30
    dynamodb.put_item(TableName=table, Item=item)
    jobs.cancel(JobRecord("default", "big", JobState.CANCELLED, "upload deleted", AT))
    after = _pending(dynamodb, table)
    assert {"sk": {"S": "~cancel#default#n#big"}}.items() <= next(
        item
        for item in after
        if item["sk"]["S"] == "~cancel#default#n#big"  # type: ignore[index]
    ).items()
    assert "big" in read_pending(after)["default"].names  # type: ignore[arg-type]

    jobs.withdraw("default", "job-3", AT + 3)
    left = read_pending(_pending(dynamodb, table))["default"]  # type: ignore[arg-type]
    assert "job-3" not in left.names
    assert {"job-2", "job-4", "big"} <= left.names
    assert jobs.record("default", "job-3") is None
