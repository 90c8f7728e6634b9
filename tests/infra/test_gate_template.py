"""The template's gate: opt-in queues, the sample gated workflow, the permissions, the alarm, the outputs."""

from __future__ import annotations

import json
from typing import Any

from dispatcher.core.events import refill_pattern
from dispatcher.core.executions import execution_arn
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.lanes import parse_lanes
from dispatcher.core.topology import DEFAULT, Lane
from dispatcher.local.gates import ENTER, LEAVE, SECTION, WAKE, gated_workflow
from dispatcher.settings import LANES_OUTPUT
from tests.infra.template import SAMPLE_WORKFLOW_ARN, deployed, sam_template, statements, transformed

GATED_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:gated"
YOURS = "arn:aws:states:us-east-1:123456789012:stateMachine:ingest"
LISTED = [
    "arn:aws:states:us-east-1:123456789012:stateMachine:crawl",
    "arn:aws:states:eu-west-1:123456789012:stateMachine:api",
]
QUEUES = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
GATE_REFS = {
    "SampleGatedWorkflow": GATED_ARN,
    # A queue's Ref is its URL: the template names the gate's queues <stack>-gate[-dead-letters].fifo.
    "GateQueue": f"{QUEUES}-gate.fifo",
    "GateDeadLetterQueue": f"{QUEUES}-gate-dead-letters.fifo",
}


def with_gate(**parameters: Any) -> Any:
    """A deploy with Gate true (and these parameters)."""
    return deployed({"Gate": "true", **parameters}, refs=GATE_REFS)


def test_the_gate_is_opt_in_and_its_queues_are_fifo_high_throughput_with_the_backstop() -> None:
    """Without Gate true there is no gate; with it, a FIFO request queue and DLQ like the job queue's."""
    template = transformed()
    gated = [
        "GateQueue",
        "GateDeadLetterQueue",
        "GateQueuesRequireTls",
        "GatedWorkflowPolicy",
        "SampleGatedWorkflow",
    ]
    assert template["Parameters"]["Gate"]["Default"] == "false"
    assert not any(deployed().conditions[template["Resources"][name]["Condition"]] for name in gated)
    assert all(with_gate().conditions[template["Resources"][name]["Condition"]] for name in gated)
    assert not with_gate(GatedStateMachineArn=YOURS).conditions["CreateSampleGatedWorkflow"]
    queue = template["Resources"]["GateQueue"]["Properties"]
    assert queue["FifoQueue"] is True
    assert (queue["DeduplicationScope"], queue["FifoThroughputLimit"]) == (
        "messageGroup",
        "perMessageGroupId",
    )
    assert queue["VisibilityTimeout"] == template["Resources"]["JobQueue"]["Properties"]["VisibilityTimeout"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == {"Ref": "MaxReceiveCount"}
    assert template["Resources"]["GateDeadLetterQueue"]["Properties"]["FifoQueue"] is True


def test_lanes_is_the_templates_gate_with_gate_true_and_the_lanes_parameter_otherwise() -> None:
    """LANES (and the output the CLI reads) names gate "gate" on the gated workflow, in pool default."""
    environment = sam_template()["Resources"]["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    default = Lane(DEFAULT, DEFAULT, "q", "d", SAMPLE_WORKFLOW_ARN)
    for gate_max, expected in (("", None), ("2", 2)):
        deploy = with_gate(GateMaxConcurrency=gate_max)
        lanes = deploy(environment["LANES"])
        assert lanes == deploy(transformed()["Outputs"][LANES_OUTPUT]["Value"])
        [gate] = parse_lanes(lanes, default, 5).members_of(kind=Gate)
        assert (gate.name, gate.pool, gate.queue_url, gate.state_machine_arn) == (
            "gate",
            DEFAULT,
            GATE_REFS["GateQueue"],
            GATED_ARN,
        )
        assert (gate.dead_letter_queue_url, gate.max_concurrency) == (
            GATE_REFS["GateDeadLetterQueue"],
            expected,
        )
    own = json.dumps({"lanes": []})
    assert deployed({"Lanes": own})(environment["LANES"]) == own
    assert deployed({"Lanes": own})(transformed()["Outputs"][LANES_OUTPUT]["Value"]) == own
    assert deployed()(transformed()["Outputs"][LANES_OUTPUT]["Value"]) == "{}"
    [rule] = sam_template()["Rules"]["GateOrOwnLanes"]["Assertions"]
    assert rule["Assert"] == {"Fn::Equals": [{"Ref": "Lanes"}, ""]}


def test_the_function_may_admit_and_check_the_gated_state_machines_and_nothing_more() -> None:
    """Admit, check STANDARD and list each gated machine (and nothing more); describe its executions."""
    assert not {"GatedStateMachines", "GatedExecutions", "GateQueue"} & deployed().statements().keys()
    for deploy, machines in (
        (with_gate(), [GATED_ARN]),
        (with_gate(GatedStateMachineArn=YOURS), [YOURS]),
        (deployed({"GateStateMachineArns": ",".join(LISTED)}), LISTED),
        (with_gate(GateStateMachineArns=",".join(LISTED)), [GATED_ARN, *LISTED]),
    ):
        by_sid = deploy.statements()
        assert by_sid["GatedStateMachines"]["Action"] == [
            "states:DescribeStateMachine",
            "states:ListExecutions",
            "states:SendTaskSuccess",
        ]
        assert by_sid["GatedStateMachines"]["Resource"] == machines
        assert by_sid["GatedExecutions"]["Action"] == ["states:DescribeExecution"]
        assert by_sid["GatedExecutions"]["Resource"] == [execution_arn(arn, "*") for arn in machines]
        assert by_sid["TargetStateMachine"]["Resource"] == [SAMPLE_WORKFLOW_ARN], (
            "no start of a gated machine"
        )
    by_sid = with_gate().statements()
    assert by_sid["GateQueue"]["Resource"] == ["arn:GateQueue"]
    assert by_sid["GateQueue"]["Action"] == [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
    ]
    assert by_sid["GateDeadLetterQueue"] == {
        "Sid": "GateDeadLetterQueue",
        "Effect": "Allow",
        "Action": ["sqs:SendMessage"],
        "Resource": ["arn:GateDeadLetterQueue"],
    }


def test_a_gated_workflow_may_send_its_requests_and_releases_and_nothing_else() -> None:
    """The managed policy (an output) sends to the gate's queue and the end-event queue only."""
    template = sam_template()
    [statement] = statements(template["Resources"]["GatedWorkflowPolicy"]["Properties"]["PolicyDocument"])
    assert statement["Action"] == ["sqs:SendMessage"]
    assert statement["Resource"] == [
        {"Fn::GetAtt": ["GateQueue", "Arn"]},
        {"Fn::GetAtt": ["EndEventQueue", "Arn"]},
    ]
    assert template["Resources"]["SampleGatedWorkflow"]["Properties"]["Policies"] == [
        {"Ref": "GatedWorkflowPolicy"}
    ]
    outputs = template["Outputs"]
    assert outputs["GatedWorkflowPolicyArn"]["Value"] == {"Ref": "GatedWorkflowPolicy"}
    assert outputs["ReleaseQueueUrl"]["Value"] == {"Ref": "EndEventQueue"}
    assert "Condition" not in outputs["ReleaseQueueUrl"]
    assert outputs["GateQueueUrl"]["Value"] == {"Ref": "GateQueue"}


def test_the_sample_gated_workflow_is_the_one_the_emulator_runs() -> None:
    """The same states as `gated_workflow` (what `dispatcher local` runs and the manual shows)."""
    properties = sam_template()["Resources"]["SampleGatedWorkflow"]["Properties"]
    assert properties["Type"] == "STANDARD"
    assert properties["DefinitionSubstitutions"] == {
        "GateQueueUrl": {"Ref": "GateQueue"},
        "ReleaseQueueUrl": {"Ref": "EndEventQueue"},
        "WakeQueueUrl": {"Ref": "EndEventQueue"},
    }
    states = properties["Definition"]["States"]
    local = json.loads(
        gated_workflow("gate", "${GateQueueUrl}", "${ReleaseQueueUrl}", wake_queue_url="${WakeQueueUrl}")
    )["States"]
    assert list(states) == list(local)
    for name in (WAKE, ENTER, LEAVE):
        assert states[name]["Resource"] == local[name]["Resource"]
        assert states[name]["Parameters"] == local[name]["Parameters"]
        assert states[name]["ResultPath"] == local[name]["ResultPath"]
    assert states[WAKE]["Parameters"]["MessageBody"] == {"wake": "gate"}
    assert states[SECTION]["Seconds"] == {"Ref": "SampleWorkflowWaitSeconds"}
    assert [states[name]["Next"] for name in ("Prepare", WAKE, ENTER, SECTION, LEAVE)] == [
        WAKE,
        ENTER,
        SECTION,
        LEAVE,
        "Finish",
    ]


def test_the_refill_rule_takes_the_gated_state_machines_ends_and_the_spool_does_not() -> None:
    """An end inside a gate frees its place at once; a gated workflow's failures are not the dispatcher's."""
    resources = transformed()["Resources"]
    rule = resources["CompletionRule"]["Properties"]["EventPattern"]
    assert with_gate()(rule) == refill_pattern([SAMPLE_WORKFLOW_ARN, GATED_ARN])
    both = with_gate(GateStateMachineArns=",".join(LISTED), LaneStateMachineArns=YOURS)
    assert both(rule) == refill_pattern([SAMPLE_WORKFLOW_ARN, YOURS, GATED_ARN, *LISTED])
    spool = resources["FailureSpoolRule"]["Properties"]["EventPattern"]["detail"]["stateMachineArn"]
    assert GATED_ARN not in json.dumps(with_gate()(spool))


def test_an_alarm_fires_when_an_execution_is_inside_a_gate_too_long() -> None:
    """On the longest time anyone has been inside (the handler's OldestInsideAge), drawn on the dashboard."""
    resources = sam_template()["Resources"]
    condition = resources["InsideTooLongAlarm"]["Condition"]
    assert with_gate().conditions[condition]
    assert deployed({"GateStateMachineArns": LISTED[0]}).conditions[condition]
    assert not deployed().conditions[condition], "no gate, no alarm about one"
    alarm = resources["InsideTooLongAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "Dispatcher",
        "OldestInsideAge",
        "Maximum",
    )
    assert alarm["Threshold"] == {"Ref": "InsideAgeAlarmSeconds"}
    assert alarm["TreatMissingData"] == "notBreaching"
    body = resources["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    assert '"OldestInsideAge"' in body


def test_an_alarm_fires_when_a_gate_request_is_dead_lettered() -> None:
    """Its execution waits at the gate until its task times out: the gate's DLQ is watched like the jobs'."""
    template = transformed()
    alarm = template["Resources"]["GateDeadLettersAlarm"]
    assert with_gate().conditions[alarm["Condition"]]
    assert not deployed().conditions[alarm["Condition"]]
    properties = alarm["Properties"]
    assert (properties["Namespace"], properties["MetricName"], properties["Threshold"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        0,
    )
    assert properties["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["GateDeadLetterQueue", "QueueName"]}}
    ]
    assert properties["AlarmActions"]["Fn::If"][0] == "HasAlarmActions"
