"""Load template.yaml as CloudFormation sees it, before and after the SAM transform."""

from __future__ import annotations

import copy
import os
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


def statements(policy_document: dict[str, Any]) -> list[dict[str, Any]]:
    """A policy's statements with Action always a list."""
    found = []
    for statement in policy_document["Statement"]:
        actions = statement["Action"]
        found.append({**statement, "Action": actions if isinstance(actions, list) else [actions]})
    return found


def function_statements() -> list[dict[str, Any]]:
    """Every inline statement of the dispatcher function's role."""
    role = transformed()["Resources"]["DispatcherFunctionRole"]["Properties"]
    return [statement for policy in role["Policies"] for statement in statements(policy["PolicyDocument"])]
