"""Cold start: importing the handler builds no tracer; tracing starts on the first traced call in Lambda."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

PROBE = textwrap.dedent(
    """
    import sys
    import dispatcher.handler
    from dispatcher import telemetry
    imported = "aws_xray_sdk.core" in sys.modules
    traced = telemetry.capture_lambda_handler(lambda event, context: event)
    answer = traced({"ok": 1}, None)
    print(imported, "aws_xray_sdk.core" in sys.modules, telemetry.tracer.cache_info().currsize, answer)
    """
)


def probe(**environment: str) -> str:
    """What a fresh interpreter's telemetry says with ``environment``."""
    clean = {
        key: value for key, value in os.environ.items() if not key.startswith(("POWERTOOLS_", "LAMBDA_"))
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**clean, "AWS_DEFAULT_REGION": "us-east-1", **environment},
    )
    return result.stdout.strip()


@pytest.mark.parametrize(
    "environment",
    [{}, {"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}],
    ids=["outside-lambda", "tracing-disabled"],
)
def test_untraced_runs_never_import_the_xray_sdk(environment: dict[str, str]) -> None:
    """Outside Lambda, or with tracing disabled, the X-Ray SDK is never imported, even by a call."""
    assert probe(**environment) == "False False 0 {'ok': 1}"


def test_traced_run_builds_the_tracer_on_the_first_call_not_at_import() -> None:
    """In Lambda with tracing on, the import is still free of X-Ray; the first call builds the Tracer."""
    assert probe(LAMBDA_TASK_ROOT="/var/task", AWS_XRAY_CONTEXT_MISSING="IGNORE_ERROR") == (
        "False True 1 {'ok': 1}"
    )
