"""The CLI as a user runs it: the installed `dispatcher` script, in a subprocess, against the emulator."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from dispatcher.emulator import FAKE_CREDENTIALS, REGION, Stack, create_stack, moto_server, pointed_at
from dispatcher.local import register_stack

SCRIPT = Path(sys.executable).parent / "dispatcher"


@dataclass
class Cli:
    """Runs `dispatcher` with the environment a user of the emulator would have."""

    endpoint_url: str
    stack_name: str
    stack: Stack

    def environment(self, **extra: str) -> dict[str, str]:
        """Only what a shell would hold: PATH, HOME, the exports `dispatcher local` prints, and ``extra``."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", str(Path.home())),
            # coverage.py measures subprocesses through its own variables.
            **{key: value for key, value in os.environ.items() if key.startswith("COVERAGE_")},
            **FAKE_CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            **extra,
        }

    def run(
        self, *arguments: str, stdin: str | None = None, stack: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``dispatcher [--stack NAME] ARGUMENTS``; its exit status and output."""
        command = [str(SCRIPT), *(["--stack", self.stack_name] if stack else []), *arguments]
        result = subprocess.run(
            command,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env if env is not None else self.environment(),
        )
        assert "Traceback" not in result.stderr, result.stderr
        return result


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    """One emulator per module; executions stay RUNNING until a test stops them."""
    with moto_server(execute=False) as endpoint_url, pointed_at(endpoint_url):
        yield endpoint_url


@pytest.fixture
def cli(emulator: str) -> Iterator[Cli]:
    """A fresh stack (with its CloudFormation outputs) in the module's emulator."""
    name = f"cli-{uuid.uuid4().hex[:8]}"
    boto3.setup_default_session()  # no hooks another test left on the default session
    with pointed_at(emulator):
        stack = create_stack(name)
        register_stack(name, stack, max_concurrency=3)
        yield Cli(emulator, name, stack)


@pytest.fixture
def aws(emulator: str) -> Iterator[dict[str, object]]:
    """In-process clients on the emulator, to set up and to look."""
    with pointed_at(emulator):
        yield {
            service: boto3.client(service, region_name=REGION)  # type: ignore[call-overload]
            for service in ("sqs", "stepfunctions", "ssm")
        }
