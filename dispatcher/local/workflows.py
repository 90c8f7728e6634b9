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
from botocore.exceptions import ClientError

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


HOLDER = {"#keeper.$": "$$.Execution.Id"}
"""The execution that takes (or gives back) a slot: its ARN, a key of the item's ``keepers``."""


def _slot_states(downstream_table: str) -> dict[str, Any]:
    """Take a slot of the downstream API (or fail with `THROTTLED_ERROR`), and give it back after the wait.

    The item keeps who holds a slot (``keepers``, by execution ARN) beside their count
    (``taken``): a slot is given back once, by its execution's release or, for an execution
    stopped or failed before it, by `release_ended` on its end.
    """
    key = {"TableName": downstream_table, "Key": CAPACITY_KEY, "ExpressionAttributeNames": HOLDER}
    return {
        "Acquire": {
            "Type": "Task",
            "Resource": "arn:aws:states:::dynamodb:updateItem",
            "Parameters": {
                **key,
                "UpdateExpression": "SET keepers.#keeper = :one ADD taken :one",
                "ConditionExpression": "attribute_not_exists(seats) OR taken < seats",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
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
            "Parameters": {**key, **RELEASE},
            "ResultPath": None,
            # Given back already (`set_capacity` found it not running): nothing to give.
            "Catch": [
                {"ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"], "Next": "CallDownstream"}
            ],
            "Next": "CallDownstream",
        },
    }


RELEASE = {
    "UpdateExpression": "REMOVE keepers.#keeper ADD taken :minus_one",
    "ConditionExpression": "attribute_exists(keepers.#keeper)",
    "ExpressionAttributeValues": {":minus_one": {"N": "-1"}},
}
"""Give a keeper's slot back, once."""


def prepare_capacity(table: str) -> None:
    """The item of the API's capacity, with no one holding a slot (before any workflow takes one)."""
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=table, Item={**CAPACITY_KEY, "keepers": {"M": {}}, "taken": {"N": "0"}}
    )


def release_ended(table: str, execution_arn: str) -> bool:
    """Give back the slot of an execution that ended holding one (stopped, failed); whether it held one.

    The API's end of a session: an execution stopped during its wait never runs its own
    release, and its slot would be lost for good.
    """
    try:
        boto3.client("dynamodb", region_name=REGION).update_item(
            TableName=table,
            Key=CAPACITY_KEY,
            ExpressionAttributeNames={"#keeper": execution_arn},
            **RELEASE,  # type: ignore[arg-type]
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise
    return True


def keepers(table: str) -> list[str]:
    """The executions holding a slot of the API now."""
    item = (
        boto3.client("dynamodb", region_name=REGION)
        .get_item(TableName=table, Key=CAPACITY_KEY)
        .get("Item", {})
    )
    return sorted(item.get("keepers", {}).get("M", {}))


def set_capacity(table: str, capacity: int | None) -> list[str]:
    """Give the simulated downstream API a capacity (None: none); the slots it found lost, and gave back.

    A slot held by an execution that is no longer RUNNING is given back first: what an
    older emulator lost (it counted no keepers), or an end whose release did not come.
    """
    stepfunctions = boto3.client("stepfunctions", region_name=REGION)
    lost = []
    for arn in keepers(table):
        try:
            running = stepfunctions.describe_execution(executionArn=arn)["status"] == "RUNNING"
        except ClientError:
            running = False  # gone with the state machine it ran
        if not running and release_ended(table, arn):
            lost.append(arn)
    client = boto3.client("dynamodb", region_name=REGION)
    if capacity is None:
        client.update_item(TableName=table, Key=CAPACITY_KEY, UpdateExpression="REMOVE seats")
        return lost
    client.update_item(
        TableName=table,
        Key=CAPACITY_KEY,
        UpdateExpression=(
            "SET seats = :capacity, keepers = if_not_exists(keepers, :none),"
            " taken = if_not_exists(taken, :zero)"
        ),
        ExpressionAttributeValues={
            ":capacity": {"N": str(capacity)},
            ":none": {"M": {}},
            ":zero": {"N": "0"},
        },
    )
    return lost


def set_downstream(table: str, *, up: bool) -> None:
    """Bring the simulated downstream API of `sample_workflow` down, or back up."""
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=table, Item={**DOWNSTREAM_KEY, "down": {"BOOL": not up}}
    )
