"""template.yaml's events: the refill rule, its queue, the failure spool, and the emulator's match."""

from __future__ import annotations

from dispatcher.core.events import failure_pattern, refill_pattern
from dispatcher.core.executions import CLOSED_STATUSES
from dispatcher.local.events import event_from_description, matches
from tests.infra.template import (
    LANE_MACHINES,
    SAMPLE_WORKFLOW_ARN,
    STATUS_ORDER,
    WITH_LANES,
    deployed,
    function_statements,
    transformed,
)


def test_refill_rule_sends_closed_status_changes_of_the_target_state_machine_to_the_end_event_queue() -> None:
    """An EventBridge rule sends every end of an execution of the target state machine, whole, to a queue."""
    resources = transformed()["Resources"]
    rule = resources["CompletionRule"]["Properties"]
    pattern = deployed()(rule["EventPattern"])
    assert pattern == {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {
            "stateMachineArn": [SAMPLE_WORKFLOW_ARN],
            "status": sorted(CLOSED_STATUSES, key=STATUS_ORDER.index),
        },
    }
    assert pattern == refill_pattern(SAMPLE_WORKFLOW_ARN)
    assert deployed(WITH_LANES)(rule["EventPattern"]) == refill_pattern([SAMPLE_WORKFLOW_ARN, *LANE_MACHINES])
    [rule_target] = rule["Targets"]
    assert rule_target["Arn"] == {"Fn::GetAtt": ["EndEventQueue", "Arn"]}
    assert not {"Input", "InputPath", "InputTransformer"} & set(rule_target), "the body is the whole event"
    assert rule_target["RetryPolicy"]["MaximumEventAgeInSeconds"] <= 60
    [allow, deny] = resources["EndEventQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert allow["Action"] == "sqs:SendMessage"
    assert allow["Resource"] == {"Fn::GetAtt": ["EndEventQueue", "Arn"]}
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["CompletionRule", "Arn"]}}}
    assert deny["Effect"] == "Deny"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert not any(
        resource["Type"] == "AWS::Lambda::Permission"
        and resource["Properties"]["Principal"] == "events.amazonaws.com"
        for resource in resources.values()
    ), "EventBridge no longer invokes the function"


def test_the_function_takes_end_events_in_batches_through_an_event_source_mapping() -> None:
    """Batch size, window and maximum concurrency as chosen; visibility and DLQ as Lambda advises."""
    resources = transformed()["Resources"]
    mapping = resources["EndEventMapping"]["Properties"]
    assert mapping["FunctionName"] == {"Ref": "DispatcherFunction"}
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["EndEventQueue", "Arn"]}
    assert mapping["BatchSize"] == 100
    assert mapping["MaximumBatchingWindowInSeconds"] == {"Ref": "EndEventBatchWindow"}
    window = transformed()["Parameters"]["EndEventBatchWindow"]
    assert window["Default"] == 1, "by default a freed slot waits at most a second for its batch"
    assert window["MinValue"] == 1, "Lambda needs a window of at least 1 s for batches of more than 10"
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 2}
    assert "FunctionResponseTypes" not in mapping, "the handler never fails a record"
    queue = resources["EndEventQueue"]["Properties"]
    timeout = resources["DispatcherFunction"]["Properties"]["Timeout"]
    assert queue["VisibilityTimeout"] >= 6 * timeout
    assert "FifoQueue" not in queue, "a standard queue: batches of more than 10 and a batching window"
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["EndEventDeadLetterQueue", "Arn"]}
    dead_letters = resources["EndEventDeadLetterQueue"]["Properties"]
    assert dead_letters["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]
    [grant] = [statement for statement in function_statements() if statement["Sid"] == "EndEventQueue"]
    assert sorted(grant["Action"]) == ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"]
    assert grant["Resource"] == {"Fn::GetAtt": ["EndEventQueue", "Arn"]}
    role = resources["DispatcherFunctionRole"]["Properties"]
    assert not any("SQSQueueExecutionRole" in str(arn) for arn in role.get("ManagedPolicyArns", []))


def test_refill_rule_is_on_by_default_and_can_be_switched_off() -> None:
    """RefillOnCompletion (default true) enables the rule; false leaves the schedule and producers' wakes."""
    template = transformed()
    assert template["Parameters"]["RefillOnCompletion"]["Default"] == "true"
    assert template["Conditions"]["RefillOnCompletion"] == {
        "Fn::Equals": [{"Ref": "RefillOnCompletion"}, "true"]
    }
    state = template["Resources"]["CompletionRule"]["Properties"]["State"]
    assert state == {"Fn::If": ["RefillOnCompletion", "ENABLED", "DISABLED"]}
    enabled = template["Resources"]["EndEventMapping"]["Properties"]["Enabled"]
    assert enabled is True, "wakes come through the end-event queue whether refill on completion is on or off"


def test_failure_spool_keeps_whole_failure_events_for_the_redrive_window() -> None:
    """FailureSpool (default true) sends FAILED, TIMED_OUT and ABORTED events, whole, to a 14-day queue.

    The rule's pattern is the one the emulator delivers with (`failure_pattern`), so the
    tests' spool is filled as the deployed one is.
    """
    template = transformed()
    resources = template["Resources"]
    assert template["Parameters"]["FailureSpool"]["Default"] == "true"
    for name in ("FailureSpoolQueue", "FailureSpoolRule", "FailureSpoolPolicy"):
        assert resources[name]["Condition"] == "FailureSpool"
    queue = resources["FailureSpoolQueue"]["Properties"]
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert "FifoQueue" not in queue
    rule = resources["FailureSpoolRule"]["Properties"]
    assert deployed()(rule["EventPattern"]) == failure_pattern(SAMPLE_WORKFLOW_ARN)
    every_lane = failure_pattern([SAMPLE_WORKFLOW_ARN, *LANE_MACHINES])
    assert deployed(WITH_LANES)(rule["EventPattern"]) == every_lane, "re-runs of every lane's failures"
    [rule_target] = rule["Targets"]
    assert rule_target["Arn"] == {"Fn::GetAtt": ["FailureSpoolQueue", "Arn"]}
    assert not {"Input", "InputPath", "InputTransformer"} & set(rule_target), (
        "the body must be the whole event"
    )
    [allow, deny] = resources["FailureSpoolPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert allow["Action"] == "sqs:SendMessage"
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["FailureSpoolRule", "Arn"]}}}
    assert deny["Effect"] == "Deny"
    assert template["Outputs"]["SpoolQueueUrl"]["Value"] == {"Ref": "FailureSpoolQueue"}


def test_emulated_events_match_the_rules_as_eventbridge_would() -> None:
    """The emulator's matcher: the spool takes its machine's failures only; the refill rule every end."""
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"

    def event(status: str, machine: str = arn) -> dict[str, object]:
        return event_from_description(
            {
                "executionArn": f"{machine.replace(':stateMachine:', ':execution:')}:x",
                "stateMachineArn": machine,
                "name": "x",
                "status": status,
                "startDate": 1.0,
                "stopDate": 2.0,
                "input": "{}",
            }
        )

    statuses = [*STATUS_ORDER, "RUNNING"]
    assert [matches(failure_pattern(arn), event(status)) for status in statuses] == [
        False, True, True, True, False
    ]  # fmt: skip
    assert [matches(refill_pattern(arn), event(status)) for status in statuses] == [
        True, True, True, True, False
    ]  # fmt: skip
    assert not matches(failure_pattern(arn), event("FAILED", arn + "-other"))


def test_emulated_events_leave_out_a_large_input_as_eventbridge_does() -> None:
    """Input and output above 248 KiB together: the event says the input is not included."""
    description = {
        "executionArn": "arn:aws:states:us-east-1:123456789012:execution:jobs:x",
        "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:jobs",
        "name": "x",
        "status": "FAILED",
        "startDate": 1.0,
        "stopDate": 2.0,
        "input": '{"padding": "' + "x" * 200_000 + '"}',
        "output": '{"padding": "' + "y" * 60_000 + '"}',
    }
    large = event_from_description(description)["detail"]
    assert (large["input"], large["inputDetails"]) == (None, {"included": False})
    small = event_from_description({**description, "output": None})["detail"]
    assert small["input"] == description["input"]
    assert small["inputDetails"] == {"included": True}
    assert (small["startDate"], small["stopDate"]) == (1000, 2000)
