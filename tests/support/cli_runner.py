"""The CLI as a user runs it: the installed `dispatcher` script, in a subprocess or in this process."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dispatcher import handler
from dispatcher.in_process import LocalContext
from dispatcher.local.account import FAKE_CREDENTIALS, environment
from dispatcher.local.stack import Stack
from dispatcher.telemetry import metrics
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
