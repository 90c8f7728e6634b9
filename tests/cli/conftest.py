"""The CLI as a user runs it: the installed `dispatcher` script, in a subprocess, against the emulator."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from dispatcher import handler
from dispatcher.core.events import failure_pattern
from dispatcher.in_process import LocalContext
from dispatcher.local.account import FAKE_CREDENTIALS, REGION, environment, pointed_at
from dispatcher.local.emulation import Emulation
from dispatcher.local.events import Rule, to_queue
from dispatcher.local.server import emulated_server
from dispatcher.local.stack import Stack, create_stack, register_stack
from dispatcher.settings import STACK_OUTPUTS, variable
from dispatcher.telemetry import metrics
from tests.support.bad_input import LINES
from tests.support.in_process import run_cli

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
            **FAKE_CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            **extra,
        }

    def spawn(
        self, *arguments: str, stdin: str | None = None, stack: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The installed `dispatcher` script in a process of its own, as a user runs it: status, output."""
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

    def run(
        self, *arguments: str, stdin: str | None = None, stack: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``dispatcher [--stack NAME] ARGUMENTS`` in this process, in the environment `spawn` gives it.

        What `spawn` returns, without a process's start (tests/support/in_process.py): the
        environment is the user's shell (``env``, else `environment`) and standard input
        is ``stdin``.
        """
        command = [*(["--stack", self.stack_name] if stack else []), *arguments]
        result = run_cli(command, env if env is not None else self.environment(), stdin=stdin or "")
        assert "Traceback" not in result.stderr, result.stderr
        return result

    def tick_in_process(self) -> dict[str, Any]:
        """One tick of the real handler in this process, at MAX 3.

        Faster than `dispatcher tick`, which test_cli runs as a user does.
        """
        variables = {
            **self.stack.environment(3, receive_wait_seconds=0),
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        with environment(variables):
            handler.reset_clients()
            try:
                return dict(handler.lambda_handler({}, LocalContext(60)))
            finally:
                metrics.clear_metrics()
                handler.reset_clients()


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


def crash_once_before(
    monkeypatch: pytest.MonkeyPatch, operation: str, *, killed: bool = False, after: int = 0
) -> None:
    """The CLI's next `operation` (e.g. ``sqs.DeleteMessageBatch``) in this process dies as with Ctrl-C.

    ``killed``: as when the process is killed instead: every later call of that run
    fails too, so nothing it held is given back (its holds run out by themselves).
    ``after``: that many calls of ``operation`` go through first.
    """
    from dispatcher.cli.config import Aws  # noqa: PLC0415

    crashes = {"left": 1, "dead": False, "pass": after}

    def crash(event_name: str, **_: object) -> None:
        if crashes["dead"]:
            raise KeyboardInterrupt
        if event_name.endswith(operation) and crashes["pass"]:
            crashes["pass"] -= 1
            return
        if event_name.endswith(operation) and crashes["left"]:
            crashes["left"] -= 1
            crashes["dead"] = killed
            raise KeyboardInterrupt

    real_client = Aws.client

    def client(self: Aws, service: str) -> object:
        made = real_client(self, service)
        if not getattr(made, "_crash_hooked", False):
            made.meta.events.register("before-call", crash)
            made._crash_hooked = True
        return made

    monkeypatch.setattr(Aws, "client", client)


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
