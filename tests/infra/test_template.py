"""template.yaml: lint-clean, transformable, and shaped the way the contract needs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dispatcher.core.executions import execution_arn
from dispatcher.core.messages import DEAD_LETTER_HEADROOM_BYTES, SQS_MAX_MESSAGE_BYTES
from dispatcher.settings import (
    MAX_CONCURRENCY_PARAMETER,
    MAX_START_CONCURRENCY,
    STACK_OUTPUTS,
    Settings,
    load_settings,
)
from tests.infra.template import (
    LANE_DEAD_LETTERS,
    LANE_MACHINES,
    LANE_QUEUES,
    SAMPLE_WORKFLOW_ARN,
    TEMPLATE,
    WITH_LANES,
    deployed,
    function_statements,
    sam_template,
    statements,
    transformed,
)

ROOT = Path(__file__).parents[2]


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


def test_producer_policy_only_sends_to_the_job_queue_and_the_wake_queue() -> None:
    """Producers may send jobs to the job queue and wakes to the end-event queue, and nothing else."""
    template = sam_template()
    sends, wakes = statements(template["Resources"]["ProducerPolicy"]["Properties"]["PolicyDocument"])
    assert sends["Action"] == wakes["Action"] == ["sqs:SendMessage"]
    assert sends["Resource"] == {"Fn::GetAtt": ["JobQueue", "Arn"]}
    assert wakes["Resource"] == {"Fn::GetAtt": ["EndEventQueue", "Arn"]}
    assert template["Outputs"]["ProducerPolicyArn"]["Value"] == {"Ref": "ProducerPolicy"}
    assert template["Outputs"]["JobQueueUrl"]["Value"] == {"Ref": "JobQueue"}
    assert template["Outputs"]["WakeQueueUrl"]["Value"] == {"Ref": "EndEventQueue"}
    variables = template["Resources"]["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["WAKE_QUEUE_URL"] == {"Ref": "EndEventQueue"}


def test_samconfig_has_deploy_defaults() -> None:
    """samconfig.toml names the stack and the deploy options `sam deploy` needs."""
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())["default"]
    assert config["global"]["parameters"]["stack_name"]
    deploy = config["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["resolve_s3"] is True
    assert deploy["confirm_changeset"] is True


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
    condition, adaptive, plain = parameter["Value"]["Fn::If"]
    assert (condition, plain) == (
        "HasAdaptive",
        {"Fn::Sub": '{"max_concurrency": ${MaxConcurrency}, "paused": false}'},
    )
    assert adaptive["Fn::Sub"][0].startswith(
        '{"max_concurrency": ${MaxConcurrency}, "paused": false, "pools": '
    )
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
    "PoolAtMinimumAlarm": "PoolsAtMinimum",
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
    from dispatcher.core.topology import DEFAULT, Lane, Pool, Topology  # noqa: PLC0415
    from dispatcher.tick.figures import figures  # noqa: PLC0415
    from dispatcher.tick.report import PoolFigures, StopReason, TickReport  # noqa: PLC0415

    lane = Lane(DEFAULT, DEFAULT, "q.fifo", "d.fifo", "arn:aws:states:us-east-1:123456789012:stateMachine:j")
    topology = Topology(pools=(Pool(DEFAULT, 5),), members=(lane,))
    ticks = [TickReport(stopped=stop, oldest_running_seconds=1.0) for stop in StopReason]
    emitted = {figure.name for tick in ticks for figure in figures(tick, topology)}
    body = sam_template()["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    for metric in ("Running", "MaxConcurrency", "Started", "OldestRunningAge", "ThrottledTicks", "BusyTicks"):
        assert f'"{metric}"' in body
        assert metric in emitted
    adaptive = TickReport(stopped=StopReason.CAPACITY)
    adaptive.pools[DEFAULT] = PoolFigures(
        max_concurrency=5, running=1, free=0, limit=1, minimum=1, floor_seconds=900.0
    )
    emitted_adaptive = {(figure.name, figure.value) for figure in figures(adaptive, topology)}
    assert {("PoolsAtMinimum", 1), ("PoolLimit", 1)} <= emitted_adaptive
    adaptive.pools[DEFAULT] = PoolFigures(
        max_concurrency=5, running=1, free=0, limit=1, minimum=1, floor_seconds=899.0
    )
    emitted_adaptive = {(figure.name, figure.value) for figure in figures(adaptive, topology)}
    assert ("PoolsAtMinimum", 0) in emitted_adaptive, "at its min, but not for 15 minutes yet"
    assert '"PoolLimit"' in body
    assert "PoolsAtMinimum" not in emitted, "only a dispatcher with an adaptive pool emits it"
    sized = TickReport(stopped=StopReason.CAPACITY)
    sized.pools[DEFAULT] = PoolFigures(max_concurrency=5, running=4, free=0, reserved=1)
    sized.pools["glue"] = PoolFigures(max_concurrency=3, running=3, free=0)
    emitted_sized = {(figure.name, figure.value) for figure in figures(sized, topology)}
    assert {("RunningSlots", 4), ("RunningSlots", 3), ("ReservedSlots", 1)} <= emitted_sized
    for metric in ("RunningSlots", "ReservedSlots"):
        assert f'MetricName=\\"{metric}\\"' in body
    for metric in ("CancelledJobs", "ExpiredJobs"):  # a tick's totals, whatever it did
        assert f'"{metric}"' in body
        assert metric in {figure.name for figure in figures(TickReport(stopped=StopReason.DRAINED), topology)}
    variables = sam_template()["Resources"]["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}


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
