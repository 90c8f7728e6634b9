"""A stack of every member kind, for the operations commands' tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import boto3

from dispatcher import handler
from dispatcher.in_process import LocalContext
from dispatcher.local.account import REGION, environment, pointed_at
from dispatcher.telemetry import metrics
from tests.support.cli_runner import Cli


@dataclass
class Members:
    """The stack: its CLI, its lanes and gate by name, its ``LANES`` and its release queue."""

    cli: Cli
    lanes: dict[str, dict[str, Any]]
    gate: dict[str, Any]
    document: str
    release_queue_url: str

    def tick(self) -> dict[str, Any]:
        """One tick of the real handler in this process, with the stack's ``LANES``."""
        variables = {
            **self.cli.stack.environment(3, receive_wait_seconds=0, lanes=self.document),
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        with pointed_at(self.cli.endpoint_url), environment(variables):
            handler.reset_clients()
            try:
                return dict(handler.lambda_handler({}, LocalContext(60)))
            finally:
                metrics.clear_metrics()
                handler.reset_clients()

    def control(self, value: dict[str, Any] | None = None) -> dict[str, Any]:
        """The control parameter's value (written first, if given)."""
        ssm = boto3.client("ssm", region_name=REGION)
        name = self.cli.stack.control_parameter
        with pointed_at(self.cli.endpoint_url):
            if value is not None:
                ssm.put_parameter(Name=name, Value=json.dumps(value), Type="String", Overwrite=True)
            return dict(json.loads(ssm.get_parameter(Name=name)["Parameter"]["Value"]))


def ok(result: Any) -> Any:
    """A command's output, after asserting it succeeded (parsed when it is JSON)."""
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.startswith("{") else result.stdout
