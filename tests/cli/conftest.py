"""The CLI as a user runs it: the installed `dispatcher` script, in a subprocess, against the emulator."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from dispatcher.core.events import failure_pattern
from dispatcher.local.account import REGION, pointed_at
from dispatcher.local.emulation import Emulation
from dispatcher.local.events import Rule, to_queue
from dispatcher.local.gates import create_gate, create_release_queue
from dispatcher.local.server import emulated_server
from dispatcher.local.stack import create_lane, create_stack, register_stack
from dispatcher.settings import STACK_OUTPUTS, variable
from tests.support.bad_input import LINES
from tests.support.cli_runner import Cli
from tests.support.members import Members


@pytest.fixture
def members(emulated: tuple[str, Emulation]) -> Iterator[Members]:
    """A stack with a lane, a gate and their pools, in the emulator, and the CLI pointed at it."""
    endpoint_url, _ = emulated
    name = f"members-{uuid.uuid4().hex[:8]}"
    boto3.setup_default_session()
    with pointed_at(endpoint_url):
        stack = create_stack(name)
        urgent = create_lane(name, "urgent", state_machine_arn=stack.state_machine_arn, priority=10)
        glue = create_lane(name, "glue", pool="glue", max_concurrency=2)
        release = create_release_queue(name)
        gate = create_gate(name, "crawl", release_queue_url=release, max_concurrency=2)
        document = json.dumps(
            {"pools": {"glue": {"max_concurrency": 4}}, "lanes": [urgent, glue], "gates": [gate]}
        )
        register_stack(name, stack, max_concurrency=3, lanes=document, release_queue_url=release)
        yield Members(
            Cli(endpoint_url, name, stack), {"urgent": urgent, "glue": glue}, gate, document, release
        )


@pytest.fixture(scope="module")
def emulated(request: pytest.FixtureRequest) -> Iterator[tuple[str, Emulation]]:
    """One emulator per module, with RedriveExecution and EventBridge emulated.

    Executions stay RUNNING until a test stops them, unless the module sets
    ``EXECUTE = True`` (then moto runs them: the sample workflow waits 1 s and calls
    the simulated downstream API).
    """
    execute = bool(getattr(request.module, "EXECUTE", False))
    with emulated_server(execute=execute) as (endpoint_url, emulation), pointed_at(endpoint_url):
        yield endpoint_url, emulation


@pytest.fixture(scope="module")
def emulator(emulated: tuple[str, Emulation]) -> str:
    """The module's emulator endpoint."""
    return emulated[0]


@pytest.fixture
def cli(emulated: tuple[str, Emulation], request: pytest.FixtureRequest) -> Iterator[Cli]:
    """A fresh stack (with its CloudFormation outputs and failure spool) in the module's emulator."""
    endpoint_url, emulation = emulated
    name = f"cli-{uuid.uuid4().hex[:8]}"
    boto3.setup_default_session()  # no hooks another test left on the default session
    with pointed_at(endpoint_url):
        wait_seconds = getattr(request.module, "WAIT_SECONDS", 1)
        stack = create_stack(name, downstream=True, wait_seconds=wait_seconds)
        register_stack(name, stack, max_concurrency=3)
        rule = Rule(failure_pattern(stack.state_machine_arn), to_queue(stack.spool_queue_url, endpoint_url))
        emulation.rules.append(rule)
        try:
            yield Cli(endpoint_url, name, stack)
        finally:
            emulation.rules.remove(rule)


@pytest.fixture
def aws(emulator: str) -> Iterator[dict[str, object]]:
    """In-process clients on the emulator, to set up and to look."""
    with pointed_at(emulator):
        yield {
            service: boto3.client(service, region_name=REGION)  # type: ignore[call-overload]
            for service in ("sqs", "stepfunctions", "ssm", "dynamodb")
        }


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A shell with no dispatcher settings, no AWS configuration, and the test's files in the cwd."""
    names = {variable(name) for name in STACK_OUTPUTS} | {"MAX_CONCURRENCY"}
    for name in names | {"AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION"}:
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name, text in LINES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path
