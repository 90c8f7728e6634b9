"""The sample workflows' simulated downstream API: its outage and its capacity (local-only).

`dispatcher local`'s sample workflow (and the tests') can call a downstream API simulated
by items of a DynamoDB table: `set_downstream` takes it down (executions fail with
``DownstreamUnavailable``), `set_capacity` gives it a capacity (executions above it fail with
``Downstream.Throttled``, an adaptive pool's signal).
"""

from __future__ import annotations

import json
from typing import Any

import boto3

from dispatcher.local.account import REGION

DOWNSTREAM_KEY = {"pk": {"S": "downstream"}, "sk": {"S": "status"}}
DOWNSTREAM_ERROR = "DownstreamUnavailable"
THROTTLED_ERROR = "Downstream.Throttled"
"""What the sample workflow fails with when the simulated downstream API is at its capacity."""
CAPACITY_KEY = {"pk": {"S": "downstream"}, "sk": {"S": "capacity"}}
"""The item of the API's capacity and the executions using it (`set_capacity`)."""


def sample_workflow(wait_seconds: float, downstream_table: str | None = None, *, slots: bool = False) -> str:
    """A STANDARD workflow like the template's sample: wait, then succeed.

    With ``downstream_table``, it uses a simulated downstream API (items in that DynamoDB
    table): after its wait it asks the API and fails with ``DownstreamUnavailable`` while it
    is down (`set_downstream` flips it): the runbook's outage. With ``slots`` too, it first
    takes one of the API's slots, failing at once with ``Downstream.Throttled`` when all are in
    use (`set_capacity`; no capacity set: never), and gives it back after its wait (two more
    tasks an execution: `dispatcher local`'s workflows have them, the tests' only when asked).
    """
    if downstream_table is None:
        return json.dumps(
            {
                "Comment": "Sample job: wait, then succeed.",
                "StartAt": "Work",
                "States": {
                    "Work": {"Type": "Wait", "Seconds": wait_seconds, "Next": "Done"},
                    "Done": {"Type": "Succeed"},
                },
            }
        )
    down = {"Variable": "$.downstream.Item.down.BOOL", "BooleanEquals": True}
    states: dict[str, Any] = {
        "Work": {"Type": "Wait", "Seconds": wait_seconds, "Next": "Release" if slots else "CallDownstream"},
        "CallDownstream": {
            "Type": "Task",
            "Resource": "arn:aws:states:::dynamodb:getItem",
            "Parameters": {"TableName": downstream_table, "Key": DOWNSTREAM_KEY},
            "ResultPath": "$.downstream",
            "Next": "Answered",
        },
        "Answered": {
            "Type": "Choice",
            "Choices": [
                {"And": [{"Variable": "$.downstream.Item", "IsPresent": True}, down], "Next": "Down"}
            ],
            "Default": "Done",
        },
        "Down": {"Type": "Fail", "Error": DOWNSTREAM_ERROR, "Cause": "the downstream API is in maintenance"},
        "Done": {"Type": "Succeed"},
    }
    if not slots:
        comment = "Sample job: wait, call the (simulated) downstream API, succeed unless it is down."
        return json.dumps({"Comment": comment, "StartAt": "Work", "States": states})
    comment = (
        "Sample job: take a slot of the (simulated) downstream API, wait, give it back, call it;"
        " fails when the API is at its capacity or down."
    )
    return json.dumps(
        {"Comment": comment, "StartAt": "Acquire", "States": {**_slot_states(downstream_table), **states}}
    )


def _slot_states(downstream_table: str) -> dict[str, Any]:
    """Take a slot of the downstream API (or fail with `THROTTLED_ERROR`), and give it back after the wait."""
    update = {"TableName": downstream_table, "Key": CAPACITY_KEY, "UpdateExpression": "ADD taken :step"}
    return {
        "Acquire": {
            "Type": "Task",
            "Resource": "arn:aws:states:::dynamodb:updateItem",
            "Parameters": {
                **update,
                "ConditionExpression": (
                    "attribute_not_exists(seats) OR attribute_not_exists(taken) OR taken < seats"
                ),
                "ExpressionAttributeValues": {":step": {"N": "1"}},
            },
            "ResultPath": None,
            "Catch": [{"ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"], "Next": "Throttled"}],
            "Next": "Work",
        },
        "Throttled": {
            "Type": "Fail",
            "Error": THROTTLED_ERROR,
            "Cause": "the downstream API is at its capacity (`downstream capacity N`)",
        },
        "Release": {
            "Type": "Task",
            "Resource": "arn:aws:states:::dynamodb:updateItem",
            "Parameters": {**update, "ExpressionAttributeValues": {":step": {"N": "-1"}}},
            "ResultPath": None,
            "Next": "CallDownstream",
        },
    }


def set_capacity(table: str, capacity: int | None) -> None:
    """Give the simulated downstream API a capacity (None: none), keeping count of who uses it."""
    client = boto3.client("dynamodb", region_name=REGION)
    if capacity is None:
        client.update_item(TableName=table, Key=CAPACITY_KEY, UpdateExpression="REMOVE seats")
        return
    client.update_item(
        TableName=table,
        Key=CAPACITY_KEY,
        UpdateExpression="SET seats = :capacity",
        ExpressionAttributeValues={":capacity": {"N": str(capacity)}},
    )


def set_downstream(table: str, *, up: bool) -> None:
    """Bring the simulated downstream API of `sample_workflow` down, or back up."""
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=table, Item={**DOWNSTREAM_KEY, "down": {"BOOL": not up}}
    )
