"""What the commands work on: one deployment's resources, from a stack's outputs or the environment.

Names come from `dispatcher.settings`: the function's variables (and the CLI's two own),
and the stack outputs the template declares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

from dispatcher.adapters.clients import service_models
from dispatcher.adapters.control import ControlParameter
from dispatcher.adapters.errors import error_code, error_message
from dispatcher.cli.errors import CliError
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.lanes import parse_lanes
from dispatcher.core.topology import DEFAULT, Lane, Topology
from dispatcher.settings import (
    LANES_OUTPUT,
    LANES_PARAMETER,
    MAX_CONCURRENCY_PARAMETER,
    STACK_OUTPUTS,
    variable,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from mypy_boto3_cloudformation import CloudFormationClient

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=5,
    read_timeout=30,
    user_agent_extra="dispatcher-cli",
)
"""An operator waits for the answer: fewer attempts than the function's, and a short connect timeout."""


REGION_NAME = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
"""The shape of every AWS region's name (us-east-1, us-gov-west-1, ap-southeast-7, ...)."""
EMULATOR_REGION = "us-east-1"


def endpoint_problem(url: str, where: str) -> str | None:
    """Why ``url`` can't be an endpoint URL (botocore needs a scheme and a host), or None."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.hostname:
        return None
    example = url if "://" in url else f"http://{url}"
    return f"{where} {url} is not a URL: give the scheme and the host, e.g. {example}"


def region_problem(region: str, where: str) -> str | None:
    """Why ``region`` can't be an AWS region's name, or None."""
    if REGION_NAME.match(region):
        return None
    return (
        f"{where} {region} is not the name of an AWS region, such as eu-west-1"
        f" (the emulator's is {EMULATOR_REGION})"
    )


@dataclass(frozen=True)
class Resources:
    """What the commands need to know about one dispatcher deployment."""

    queue_url: str | None = None
    dead_letter_queue_url: str | None = None
    state_machine_arn: str | None = None
    state_table: str | None = None
    control_parameter: str | None = None
    dispatcher_function_name: str | None = None
    spool_queue_url: str | None = None
    wake_queue_url: str | None = None
    """Where producers wake the dispatcher after queueing (None: no wakes)."""
    max_concurrency: int | None = None
    lanes: str | None = None
    """``LANES`` (or the stack's Lanes parameter): more lanes and pools."""
    source: str = "environment"

    def need(self, field_name: str) -> str:
        """The named resource, or a clear error saying where it should have come from."""
        problem = self.unset([field_name])
        if problem is not None:
            raise CliError(problem)
        return str(getattr(self, field_name))

    def unset(self, names: Iterable[str]) -> str | None:
        """What to set for the settings among ``names`` that are unset, in one line; None if all are set."""
        missing = [name for name in dict.fromkeys(names) if getattr(self, name) in (None, "")]
        if not missing:
            return None
        if self.source.startswith("stack "):
            stack = self.source.removeprefix("stack ")
            where = [
                f"parameter {MAX_CONCURRENCY_PARAMETER}" if name == "max_concurrency" else STACK_OUTPUTS[name]
                for name in missing
            ]
            return f"stack {stack} lacks {', '.join(where)}: is it a dispatcher stack, fully deployed?"
        variables = ", ".join(variable(name) for name in missing)
        return f"not configured: set {variables} (or use --stack NAME)"

    def environment_max(self) -> int:
        """MAX_CONCURRENCY (or the stack's MaxConcurrency), which the control parameter may override."""
        if self.max_concurrency is None:
            raise CliError(str(self.unset(["max_concurrency"])))
        return self.max_concurrency

    def topology(self, default_max: int = 0) -> Topology:
        """Every pool and lane, the environment's (``default``, of MAX ``default_max``) first."""
        default = Lane(
            name=DEFAULT,
            pool=DEFAULT,
            queue_url=self.need("queue_url"),
            dead_letter_queue_url=self.need("dead_letter_queue_url"),
            state_machine_arn=self.need("state_machine_arn"),
        )
        try:
            return parse_lanes(self.lanes, default, default_max)
        except ConfigurationError as error:
            where = (
                "the environment" if self.source == "environment" else f"the Lanes parameter of {self.source}"
            )
            raise CliError(f"{error} ({where})") from error

    def function_environment(self) -> dict[str, str]:
        """The dispatcher function's environment for a local tick."""
        names = ("queue_url", "dead_letter_queue_url", "state_machine_arn", "state_table")
        variables = {variable(name): self.need(name) for name in names}
        variables[variable("max_concurrency")] = str(self.environment_max())
        if self.control_parameter:
            variables[variable("control_parameter")] = self.control_parameter
        if self.lanes:
            variables[variable("lanes")] = self.lanes
        return variables


RESOURCE_FIELDS = tuple(field.name for field in fields(Resources) if field.name in STACK_OUTPUTS)
"""The resources read from a variable or a stack output of the same field name."""


class Aws:
    """boto3 clients for the CLI, built on first use, honouring --region and --endpoint-url."""

    def __init__(self, region: str | None, endpoint_url: str | None) -> None:
        core = botocore.session.Session()
        core.register_component("data_loader", service_models())  # the models: read once a process
        self._session = boto3.session.Session(region_name=region, botocore_session=core)
        self._endpoint_url = endpoint_url
        self._clients: dict[str, Any] = {}

    @property
    def region(self) -> str | None:
        """The region every client uses: --region, else the usual AWS configuration."""
        return self._session.region_name

    def client(self, service: str) -> Any:
        """A client for ``service`` (cached)."""
        if service not in self._clients:
            self._clients[service] = self._session.client(
                service,  # type: ignore[call-overload]  # any service name the CLI uses
                endpoint_url=self._endpoint_url,
                config=CLIENT_CONFIG,
            )
        return self._clients[service]


@dataclass(frozen=True)
class DeployedStack:
    """What `DescribeStacks` says of one stack: its status, outputs and parameters."""

    status: str
    outputs: dict[str, str]
    parameters: dict[str, str | None]


def describe_stack(cloudformation: CloudFormationClient, stack: str) -> DeployedStack:
    """A deployed stack; a stack that doesn't exist is one line naming the region."""
    try:
        [description] = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if error_code(error) == "ValidationError":
            region = cloudformation.meta.region_name
            raise CliError(
                f"stack {stack} not found in {region}: {error_message(error)} (check --stack and --region)"
            ) from error
        raise
    return DeployedStack(
        status=description.get("StackStatus", "status unknown"),
        outputs={output["OutputKey"]: output["OutputValue"] for output in description.get("Outputs", [])},
        parameters={
            item["ParameterKey"]: item.get("ParameterValue") for item in description.get("Parameters", [])
        },
    )


def resources_from_stack(cloudformation: CloudFormationClient, stack: str) -> Resources:
    """Read a deployed stack's outputs (and its MaxConcurrency parameter)."""
    deployed = describe_stack(cloudformation, stack)
    max_parameter = deployed.parameters.get(MAX_CONCURRENCY_PARAMETER)
    return Resources(
        **{name: deployed.outputs.get(STACK_OUTPUTS[name]) for name in RESOURCE_FIELDS},
        max_concurrency=int(max_parameter) if max_parameter and max_parameter.isdigit() else None,
        lanes=deployed.outputs.get(LANES_OUTPUT) or deployed.parameters.get(LANES_PARAMETER) or None,
        source=f"stack {stack}",
    )


def resources_from_environment(environ: Mapping[str, str]) -> tuple[Resources, dict[str, str]]:
    """Read the function's own variables (and the CLI's); field → the problem with its value."""
    raw_max = environ.get(variable("max_concurrency"))
    problems = {}
    if raw_max is not None and not raw_max.strip().isdigit():
        problems["max_concurrency"] = (
            f"{variable('max_concurrency')} must be an integer >= 0, not {raw_max!r}"
        )
        raw_max = None
    found = {name: environ.get(variable(name)) or None for name in RESOURCE_FIELDS}
    resources = Resources(
        **found,  # type: ignore[arg-type]
        max_concurrency=None if raw_max is None else int(raw_max),
        lanes=environ.get(variable("lanes")) or None,
    )
    return resources, problems


def control_parameter(aws: Aws, resources: Resources) -> ControlParameter | None:
    """The deployment's control parameter, if it has one."""
    if not resources.control_parameter:
        return None
    return ControlParameter(resources.control_parameter, client=aws.client("ssm"))
