"""Load template.yaml as CloudFormation sees it, before and after the SAM transform."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

TEMPLATE = Path(__file__).parents[2] / "template.yaml"


class _NoManagedPolicies:
    """The SAM translator asks IAM for managed policy ARNs only for policy names we don't use."""

    def load(self) -> dict[str, str]:
        return {}


@cache
def _sam_template() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text()))


def sam_template() -> dict[str, Any]:
    """template.yaml parsed, with intrinsic functions kept as dicts."""
    return copy.deepcopy(_sam_template())


@cache
def _transformed(target_arn: str) -> dict[str, Any]:
    template = sam_template()
    # `sam package` replaces the local CodeUri with an S3 location before the transform.
    template["Resources"]["DispatcherFunction"]["Properties"]["CodeUri"] = "s3://bucket/dispatcher.zip"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return dict(transform(template, {"TargetStateMachineArn": target_arn}, _NoManagedPolicies()))


def transformed(target_arn: str = "") -> dict[str, Any]:
    """The CloudFormation template `sam deploy` would create."""
    return copy.deepcopy(_transformed(target_arn))


NO_VALUE = {"Ref": "AWS::NoValue"}


def _branches(statement: dict[str, Any]) -> list[dict[str, Any]]:
    """A statement, or each statement a conditional one (``Fn::If``) may be (none for AWS::NoValue)."""
    if list(statement) == ["Fn::If"]:
        _, chosen, otherwise = statement["Fn::If"]
        return [*_branches(chosen), *_branches(otherwise)]
    return [] if statement == NO_VALUE else [statement]


def _listed(statement: dict[str, Any]) -> dict[str, Any]:
    actions = statement["Action"]
    return {**statement, "Action": actions if isinstance(actions, list) else [actions]}


def statements(policy_document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every statement a policy may have (each branch of a conditional one), Action always a list."""
    return [_listed(branch) for statement in policy_document["Statement"] for branch in _branches(statement)]


def raw_function_statements() -> list[dict[str, Any]]:
    """The dispatcher function's role's inline statements as written (a conditional one unresolved)."""
    role = transformed()["Resources"]["DispatcherFunctionRole"]["Properties"]
    return [statement for policy in role["Policies"] for statement in policy["PolicyDocument"]["Statement"]]


def function_statements() -> list[dict[str, Any]]:
    """Every inline statement the dispatcher function's role may have."""
    return [_listed(branch) for statement in raw_function_statements() for branch in _branches(statement)]


def evaluate(  # noqa: PLR0911, PLR0912 — one branch per intrinsic
    value: Any, refs: dict[str, Any], attributes: dict[str, str], conditions: dict[str, bool]
) -> Any:
    """Resolve CloudFormation's intrinsic functions in ``value`` as a deploy would.

    ``refs``: what ``Ref`` gives for each parameter, resource and pseudo parameter;
    ``attributes``: what ``Fn::GetAtt [name, Arn]`` gives per resource; ``conditions``:
    each condition's value (`evaluate_conditions`).
    """

    def again(item: Any) -> Any:
        return evaluate(item, refs, attributes, conditions)

    if isinstance(value, list):
        return [again(item) for item in value]
    if (
        not isinstance(value, dict)
        or len(value) != 1
        or not next(iter(value)).startswith(("Fn::", "Ref", "Condition"))
    ):
        return {key: again(item) for key, item in value.items()} if isinstance(value, dict) else value
    [(function, argument)] = value.items()
    if function == "Ref":
        return refs[argument]
    if function == "Condition":
        return conditions[argument]
    if function == "Fn::GetAtt":
        names = argument if isinstance(argument, list) else argument.split(".")
        assert names[1] == "Arn", names
        return attributes[names[0]]
    if function == "Fn::If":
        return again(argument[1] if conditions[argument[0]] else argument[2])
    if function == "Fn::Join":
        return argument[0].join(again(argument[1]))
    if function == "Fn::Split":
        return again(argument[1]).split(argument[0])
    if function == "Fn::Select":
        return again(argument[1])[int(argument[0])]
    if function == "Fn::Equals":
        return again(argument[0]) == again(argument[1])
    if function == "Fn::Not":
        return not again(argument[0])
    if function == "Fn::And":
        return all(again(item) for item in argument)
    if function == "Fn::Or":
        return any(again(item) for item in argument)
    if function == "Fn::Sub":
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        names = {**refs, **{name: again(item) for name, item in variables.items()}}
        for name, replacement in names.items():
            if isinstance(replacement, str):
                text = text.replace("${" + name + "}", replacement)
        assert "${" not in text, text
        return text
    raise AssertionError(f"unexpected intrinsic {function}")


def evaluate_conditions(template: dict[str, Any], refs: dict[str, Any]) -> dict[str, bool]:
    """Every condition of ``template`` for these parameter values (conditions may use earlier ones)."""
    conditions: dict[str, bool] = {}
    pending = dict(template.get("Conditions", {}))
    while pending:
        for name, expression in list(pending.items()):
            try:
                conditions[name] = bool(evaluate(expression, refs, {}, conditions))
            except KeyError:
                continue
            del pending[name]
    return conditions


def parameter_refs(template: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``Ref`` of each parameter: ``values`` where given, else its default (a list for a list type)."""
    refs: dict[str, Any] = {
        "AWS::Partition": "aws",
        "AWS::Region": "us-east-1",
        "AWS::AccountId": "123456789012",
        "AWS::NoValue": None,
    }
    for name, parameter in template["Parameters"].items():
        value = values.get(name, parameter.get("Default", ""))
        if parameter["Type"] == "CommaDelimitedList" and isinstance(value, str):
            value = value.split(",")
        refs[name] = value
    return refs


SAMPLE_WORKFLOW_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:sample"


@dataclass(frozen=True)
class Deployed:
    """The transformed template as one deploy resolves it: call it on any part of the template."""

    template: dict[str, Any]
    refs: dict[str, Any]
    attributes: dict[str, str]
    conditions: dict[str, bool]

    def __call__(self, value: Any) -> Any:
        """``value`` with every intrinsic function resolved."""
        return evaluate(value, self.refs, self.attributes, self.conditions)

    def statements(self) -> dict[str, dict[str, Any]]:
        """The function role's inline statements by Sid, resolved (Action and Resource always lists)."""
        resolved = {}
        for raw in raw_function_statements():
            statement = self(raw)
            if statement is None:  # a conditional statement left out (AWS::NoValue)
                continue
            resource = statement["Resource"]
            resolved[statement["Sid"]] = {
                **_listed(statement),
                "Resource": resource if isinstance(resource, list) else [resource],
            }
        return resolved


def deployed(
    parameters: dict[str, Any] | None = None,
    refs: dict[str, Any] | None = None,
    attributes: dict[str, str] | None = None,
) -> Deployed:
    """A deploy with these parameter values.

    A resource's Ref is its name and its Arn ``arn:<name>``, unless ``refs`` / ``attributes``
    say otherwise (the sample workflow's Ref is an ARN).
    """
    template = transformed()
    resolved = parameter_refs(template, parameters or {})
    resolved.update({name: name for name in template["Resources"]})
    resolved["SampleWorkflow"] = SAMPLE_WORKFLOW_ARN
    resolved.update(refs or {})
    arns = {name: f"arn:{name}" for name in template["Resources"]}
    arns.update(attributes or {})
    return Deployed(template, resolved, arns, evaluate_conditions(template, resolved))


STATUS_ORDER = ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"]
"""The closed statuses in the order the template lists them."""

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
"""Template parameters of a stack with two more lanes (one in another region)."""
