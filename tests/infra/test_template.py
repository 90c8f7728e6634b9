"""template.yaml: lint-clean, transformable, and shaped the way the contract needs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cfnlint.api import lint_file

from dispatcher.core.events import failure_pattern, refill_pattern
from dispatcher.core.executions import CLOSED_STATUSES, execution_arn
from dispatcher.core.messages import DEAD_LETTER_HEADROOM_BYTES, SQS_MAX_MESSAGE_BYTES
from dispatcher.local.events import event_from_description, matches
from dispatcher.settings import (
    MAX_CONCURRENCY_PARAMETER,
    MAX_START_CONCURRENCY,
    STACK_OUTPUTS,
    Settings,
    load_settings,
)
from tests.infra.template import (
    SAMPLE_WORKFLOW_ARN,
    TEMPLATE,
    deployed,
    function_statements,
    sam_template,
    statements,
    transformed,
)

ROOT = Path(__file__).parents[2]
STATUS_ORDER = ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"]


def test_template_is_cfn_lint_clean() -> None:
    """cfn-lint reports nothing: no error, warning or informational finding."""
    assert [str(match) for match in lint_file(TEMPLATE)] == []


@pytest.mark.skipif(shutil.which("sam", path=str(Path(sys.executable).parent)) is None, reason="aws-sam-cli")
def test_template_passes_sam_validate_lint() -> None:
    """`sam validate --lint` accepts the template."""
    sam = str(Path(sys.executable).parent / "sam")
    result = subprocess.run(
        [sam, "validate", "--lint", "--template-file", str(TEMPLATE), "--region", "us-east-1"],
        capture_output=True,
        text=True,
        check=False,
        env={"SAM_CLI_TELEMETRY": "0", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("target", ["", "arn:aws:states:eu-west-1:111122223333:stateMachine:jobs"])
def test_template_transforms_with_and_without_target(target: str) -> None:
    """The SAM transform succeeds both for the sample workflow and for a given state machine."""
    resources = transformed(target)["Resources"]
    assert resources["DispatcherFunction"]["Type"] == "AWS::Lambda::Function"
    assert resources["SampleWorkflow"]["Condition"] == "CreateSampleWorkflow"


def test_function_environment_mirrors_settings_one_to_one() -> None:
    """Every Settings field is set in the template, and nothing the settings don't read."""
    variables = sam_template()["Resources"]["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    ours = {name for name in variables if not name.startswith("POWERTOOLS_")}
    assert ours == {name.upper() for name in Settings.model_fields}


def test_every_output_the_cli_reads_is_declared_with_its_parameter() -> None:
    """The outputs (and the MAX parameter) the CLI reads with --stack are the template's own."""
    template = sam_template()
    assert set(STACK_OUTPUTS.values()) <= set(template["Outputs"])
    assert MAX_CONCURRENCY_PARAMETER in template["Parameters"]


def test_function_runtime_concurrency_and_async_limits() -> None:
    """python3.13 on arm64, reserved concurrency only if asked for, no async retries, a short event age."""
    resources = transformed()["Resources"]
    function = resources["DispatcherFunction"]["Properties"]
    assert function["Runtime"] == "python3.13"
    assert function["Architectures"] == ["arm64"]
    assert function["ReservedConcurrentExecutions"] == {
        "Fn::If": ["HasReservedConcurrency", {"Ref": "ReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
    }
    assert transformed()["Parameters"]["ReservedConcurrency"]["Default"] == ""
    assert function["Handler"] == "dispatcher.handler.lambda_handler"
    invoke_config = resources["DispatcherFunctionEventInvokeConfig"]["Properties"]
    assert invoke_config["MaximumRetryAttempts"] == 0
    assert invoke_config["MaximumEventAgeInSeconds"] <= 120


def test_function_timeout_is_well_below_queue_visibility_timeout() -> None:
    """A tick always ends before the messages it holds could be redelivered."""
    resources = sam_template()["Resources"]
    timeout = resources["DispatcherFunction"]["Properties"]["Timeout"]
    visibility = resources["JobQueue"]["Properties"]["VisibilityTimeout"]
    assert timeout * 2 <= visibility


def test_schedule_is_eventbridge_scheduler_every_minute_by_default() -> None:
    """EventBridge Scheduler ticks at the ScheduleExpression parameter, rate 1 minute by default."""
    template = transformed()
    schedule = template["Resources"]["DispatcherFunctionTick"]
    assert schedule["Type"] == "AWS::Scheduler::Schedule"
    assert schedule["Properties"]["ScheduleExpression"] == {"Ref": "ScheduleExpression"}
    assert template["Parameters"]["ScheduleExpression"]["Default"] == "rate(1 minute)"


def test_queues_are_fifo_encrypted_with_a_high_redrive_backstop() -> None:
    """FIFO, SSE, a high redrive backstop, and a source limit that leaves room for the DLQ copy's reason."""
    template = sam_template()
    queue = template["Resources"]["JobQueue"]["Properties"]
    dead_letters = template["Resources"]["DeadLetterQueue"]["Properties"]
    assert queue["FifoQueue"] is True
    assert dead_letters["FifoQueue"] is True
    assert queue["SqsManagedSseEnabled"] is True
    assert dead_letters["SqsManagedSseEnabled"] is True
    assert dead_letters["MaximumMessageSize"] == SQS_MAX_MESSAGE_BYTES
    assert queue["MaximumMessageSize"] == SQS_MAX_MESSAGE_BYTES - DEAD_LETTER_HEADROOM_BYTES
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}
    assert queue["RedrivePolicy"]["maxReceiveCount"] == {"Ref": "MaxReceiveCount"}
    assert template["Parameters"]["MaxReceiveCount"]["Default"] >= 100
    assert template["Parameters"]["MaxReceiveCount"]["MinValue"] >= 100


def test_queues_deny_requests_without_tls() -> None:
    """A queue policy denies every request that isn't over TLS, on both queues."""
    policy = sam_template()["Resources"]["QueuesRequireTls"]["Properties"]
    [statement] = statements(policy["PolicyDocument"])
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert policy["Queues"] == [{"Ref": "JobQueue"}, {"Ref": "DeadLetterQueue"}]


def test_state_table_keys_ttl_and_encryption() -> None:
    """pk/sk string keys, on-demand, TTL on expires_at, encrypted."""
    table = sam_template()["Resources"]["StateTable"]["Properties"]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert {key["AttributeName"]: key["KeyType"] for key in table["KeySchema"]} == {
        "pk": "HASH",
        "sk": "RANGE",
    }
    assert {a["AttributeName"]: a["AttributeType"] for a in table["AttributeDefinitions"]} == {
        "pk": "S",
        "sk": "S",
    }
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["SSESpecification"]["SSEEnabled"] is True


def test_sample_workflow_is_standard_wait_then_succeed() -> None:
    """With no target, the stack deploys a STANDARD workflow: a configurable Wait, then Succeed."""
    workflow = sam_template()["Resources"]["SampleWorkflow"]["Properties"]
    assert workflow["Type"] == "STANDARD"
    states = workflow["Definition"]["States"]
    assert states[workflow["Definition"]["StartAt"]] == {
        "Type": "Wait",
        "Seconds": {"Ref": "SampleWorkflowWaitSeconds"},
        "Next": "Done",
    }
    assert states["Done"] == {"Type": "Succeed"}


def test_function_policy_grants_no_wildcards() -> None:
    """No statement of the function's own policy uses a * action or a * resource."""
    for statement in function_statements():
        assert statement["Effect"] == "Allow"
        assert all("*" not in action for action in statement["Action"])
        assert statement["Resource"] != "*"


def test_function_policy_grants_each_service_its_own_resource() -> None:
    """State machine, executions, queue, DLQ and table actions are scoped to those resources."""
    by_sid = deployed().statements()
    assert by_sid["TargetStateMachine"]["Resource"] == [SAMPLE_WORKFLOW_ARN]
    assert by_sid["TargetExecutions"]["Resource"] == [execution_arn(SAMPLE_WORKFLOW_ARN, "*")]
    assert by_sid["JobQueue"]["Resource"] == ["arn:JobQueue"]
    assert by_sid["DeadLetterQueue"]["Resource"] == ["arn:DeadLetterQueue"]
    assert by_sid["DeadLetterQueue"]["Action"] == ["sqs:SendMessage"]
    assert by_sid["StateTable"]["Resource"] == ["arn:StateTable"]
    target = "arn:aws:states:us-east-1:123456789012:stateMachine:orders"
    assert deployed({"TargetStateMachineArn": target}).statements()["TargetStateMachine"]["Resource"] == [
        target
    ]


LANE_MACHINES = [
    "arn:aws:states:us-east-1:123456789012:stateMachine:urgent",
    "arn:aws:states:eu-west-1:123456789012:stateMachine:backfill",
]
LANE_QUEUES = [
    "arn:aws:sqs:us-east-1:123456789012:urgent.fifo",
    "arn:aws:sqs:us-east-1:123456789012:backfill.fifo",
]
LANE_DEAD_LETTERS = ["arn:aws:sqs:us-east-1:123456789012:urgent-dlq.fifo"]
WITH_LANES = {
    "LaneQueueArns": ",".join(LANE_QUEUES),
    "LaneDeadLetterQueueArns": ",".join(LANE_DEAD_LETTERS),
    "LaneStateMachineArns": ",".join(LANE_MACHINES),
}


def test_each_lanes_queues_and_state_machine_are_granted_by_name_and_nothing_more() -> None:
    """A lane is a parameter change: its queue, DLQ and state machine (and its executions) are named."""
    by_sid = deployed(WITH_LANES).statements()
    assert by_sid["TargetStateMachine"]["Resource"] == [SAMPLE_WORKFLOW_ARN, *LANE_MACHINES]
    assert by_sid["TargetExecutions"]["Resource"] == [
        execution_arn(arn, "*") for arn in [SAMPLE_WORKFLOW_ARN, *LANE_MACHINES]
    ]
    assert by_sid["JobQueue"]["Resource"] == ["arn:JobQueue", *LANE_QUEUES]
    assert by_sid["DeadLetterQueue"]["Resource"] == ["arn:DeadLetterQueue", *LANE_DEAD_LETTERS]
    for statement in by_sid.values():
        for resource in statement["Resource"]:
            assert resource, "an empty list parameter must not grant an empty resource"
            if "*" in resource:
                assert resource.endswith(":*")
                assert ":execution:" in resource


def test_producer_policy_only_sends_to_the_job_queue() -> None:
    """The managed policy producers attach grants sqs:SendMessage on the job queue and nothing else."""
    template = sam_template()
    [statement] = statements(template["Resources"]["ProducerPolicy"]["Properties"]["PolicyDocument"])
    assert statement["Action"] == ["sqs:SendMessage"]
    assert statement["Resource"] == {"Fn::GetAtt": ["JobQueue", "Arn"]}
    assert template["Outputs"]["ProducerPolicyArn"]["Value"] == {"Ref": "ProducerPolicy"}
    assert template["Outputs"]["JobQueueUrl"]["Value"] == {"Ref": "JobQueue"}


def test_samconfig_has_deploy_defaults() -> None:
    """samconfig.toml names the stack and the deploy options `sam deploy` needs."""
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())["default"]
    assert config["global"]["parameters"]["stack_name"]
    deploy = config["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["resolve_s3"] is True
    assert deploy["confirm_changeset"] is True


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
    assert mapping["MaximumBatchingWindowInSeconds"] == 1, "a freed slot waits at most a second for its batch"
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
    """RefillOnCompletion (default true) enables the rule and the mapping; false leaves only the schedule."""
    template = transformed()
    assert template["Parameters"]["RefillOnCompletion"]["Default"] == "true"
    assert template["Conditions"]["RefillOnCompletion"] == {
        "Fn::Equals": [{"Ref": "RefillOnCompletion"}, "true"]
    }
    state = template["Resources"]["CompletionRule"]["Properties"]["State"]
    assert state == {"Fn::If": ["RefillOnCompletion", "ENABLED", "DISABLED"]}
    enabled = template["Resources"]["EndEventMapping"]["Properties"]["Enabled"]
    assert enabled == {"Fn::If": ["RefillOnCompletion", True, False]}


def test_throughput_parameters_match_the_settings_bounds() -> None:
    """StartConcurrency and LoopSeconds reach the function within what the settings accept."""
    template = sam_template()
    variables = template["Resources"]["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["START_CONCURRENCY"] == {"Ref": "StartConcurrency"}
    assert variables["LOOP_SECONDS"] == {"Ref": "LoopSeconds"}
    assert template["Parameters"]["StartConcurrency"]["MaxValue"] == MAX_START_CONCURRENCY
    timeout = template["Resources"]["DispatcherFunction"]["Properties"]["Timeout"]
    margin = float(variables["TIME_MARGIN_SECONDS"])
    assert template["Parameters"]["LoopSeconds"]["MaxValue"] + margin <= timeout


def test_control_parameter_starts_from_max_concurrency_and_only_it_is_readable() -> None:
    """The template creates the control parameter from MaxConcurrency; the role may read it alone."""
    resources = sam_template()["Resources"]
    parameter = resources["ControlParameter"]["Properties"]
    assert parameter["Type"] == "String"
    assert parameter["Value"] == {"Fn::Sub": '{"max_concurrency": ${MaxConcurrency}, "paused": false}'}
    variables = resources["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["CONTROL_PARAMETER"] == {"Ref": "ControlParameter"}
    [ssm] = [statement for statement in function_statements() if statement["Sid"] == "ControlParameter"]
    assert ssm["Action"] == ["ssm:GetParameter"]
    assert ssm["Resource"] == {
        "Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${ControlParameter}"
    }


ALARMS = {
    "DeadLettersAlarm": "ApproximateNumberOfMessagesVisible",
    "StallAlarm": "ApproximateAgeOfOldestMessage",
    "ErrorsAlarm": "Errors",
    "OldestRunningAlarm": "OldestRunningAge",
    "FailureSpoolAlarm": "FailedInvocations",
    "EndEventDeadLettersAlarm": "ApproximateNumberOfMessagesVisible",
}


def test_alarms_watch_dead_letters_stalls_errors_throttles_and_old_executions() -> None:
    """Each alarm the runbook explains exists, on the right metric, notifying the topic when there is one."""
    resources = sam_template()["Resources"]
    for name, metric in ALARMS.items():
        alarm = resources[name]["Properties"]
        assert alarm["MetricName"] == metric, name
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["AlarmActions"]["Fn::If"][0] == "HasAlarmActions"
    throttled = resources["ThrottledAlarm"]["Properties"]["Metrics"]
    assert {
        metric["MetricStat"]["Metric"]["MetricName"] for metric in throttled if "MetricStat" in metric
    } == {
        "ThrottledTicks",
        "Throttles",
    }
    assert resources["AlarmTopic"]["Condition"] == "CreateAlarmTopic"
    end_events = resources["EndEventDeadLettersAlarm"]["Properties"]["Dimensions"]
    assert end_events == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["EndEventDeadLetterQueue", "QueueName"]}}
    ]
    spool = resources["FailureSpoolAlarm"]
    assert spool["Condition"] == "FailureSpool"
    assert spool["Properties"]["Dimensions"] == [{"Name": "RuleName", "Value": {"Ref": "FailureSpoolRule"}}]


def test_alarm_metrics_are_the_ones_the_handler_emits() -> None:
    """The dashboard's custom metrics are emitted by the handler, under the stack's service name."""
    from dispatcher.core.topology import DEFAULT, Lane, PoolLimit, Topology  # noqa: PLC0415
    from dispatcher.tick.figures import figures  # noqa: PLC0415
    from dispatcher.tick.report import StopReason, TickReport  # noqa: PLC0415

    lane = Lane(DEFAULT, DEFAULT, "q.fifo", "d.fifo", "arn:aws:states:us-east-1:123456789012:stateMachine:j")
    topology = Topology(pools=(PoolLimit(DEFAULT, 5),), lanes=(lane,))
    ticks = [TickReport(stopped=stop, oldest_running_seconds=1.0) for stop in StopReason]
    emitted = {figure.name for tick in ticks for figure in figures(tick, topology)}
    body = sam_template()["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    for metric in ("Running", "MaxConcurrency", "Started", "OldestRunningAge", "ThrottledTicks", "BusyTicks"):
        assert f'"{metric}"' in body
        assert metric in emitted
    variables = sam_template()["Resources"]["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}


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


DEPLOY_PAGE = ROOT / "docs" / "deploy-and-local.md"
# The deploy page's names for the services of CloudFormation's resource types.
SERVICE_NAMES = {
    "CloudWatch": "CloudWatch",
    "DynamoDB": "DynamoDB",
    "Events": "EventBridge",
    "IAM": "IAM",
    "Lambda": "Lambda",
    "Logs": "CloudWatch Logs",
    "SNS": "SNS",
    "SQS": "SQS",
    "SSM": "SSM",
    "Scheduler": "EventBridge Scheduler",
    "StepFunctions": "Step Functions",
}


def test_the_deploy_page_lists_a_permission_for_every_service_the_stack_creates_resources_in() -> None:
    """Every resource type `sam deploy` creates (with alarm e-mail, sample workflow) has its row."""
    text = DEPLOY_PAGE.read_text()
    table = text[text.index("## Permissions to deploy") : text.index("## Tear down")]
    rows = {line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")}
    resources = transformed()["Resources"].values()
    services = {resource["Type"].split("::")[1] for resource in resources}
    assert services <= SERVICE_NAMES.keys(), services - SERVICE_NAMES.keys()
    listed = {name for row in rows for name in re.split(r" and ", row)}
    assert {SERVICE_NAMES[service] for service in services} <= listed


def test_tenant_parameters_reach_lane_default_and_every_allowed_value_is_a_valid_setting() -> None:
    """MaxPerGroup (empty: no limit) and FairShare become MAX_PER_GROUP and FAIR_SHARE, as settings read."""
    template = sam_template()
    variables = template["Resources"]["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["MAX_PER_GROUP"] == {
        "Fn::If": ["HasMaxPerGroup", {"Ref": "MaxPerGroup"}, {"Ref": "AWS::NoValue"}]
    }
    assert variables["FAIR_SHARE"] == {"Ref": "FairShare"}
    pattern = re.compile(template["Parameters"]["MaxPerGroup"]["AllowedPattern"])
    assert template["Parameters"]["MaxPerGroup"]["Default"] == ""
    for value, allowed in (("", True), ("1", True), ("250", True), ("0", False), ("-1", False), ("x", False)):
        assert bool(pattern.fullmatch(value)) is allowed, value
    environment = {
        "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo",
        "DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq.fifo",
        "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:jobs",
        "MAX_CONCURRENCY": "5",
        "STATE_TABLE": "state",
    }
    for fair in template["Parameters"]["FairShare"]["AllowedValues"]:
        lane = (
            load_settings({**environment, "MAX_PER_GROUP": "250", "FAIR_SHARE": fair}).topology().default_lane
        )
        assert (lane.max_per_group, lane.fair_share) == (250, fair == "true")
