"""Cold start: the handler's import time, and the size of the Lambda artifact `sam build` makes."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from tools.artifact import build

ROOT = Path(__file__).parents[1]

IMPORTS = {
    "dispatcher.handler": "import dispatcher.handler",
    "dispatcher.handler + Tracer() at import (before)": (
        "import dispatcher.handler\nfrom aws_lambda_powertools import Tracer\nTracer(service='dispatcher')"
    ),
}


def import_seconds(code: str, runs: int) -> float:
    """Median wall time of ``code`` in a fresh interpreter, less the interpreter's own start."""

    def timed(source: str) -> float:
        probe = (
            "import time\nstarted = time.perf_counter()\n"
            f"exec({source!r})\nprint(time.perf_counter() - started)"
        )
        environment = {key: value for key, value in os.environ.items() if not key.startswith("POWERTOOLS_")}
        result = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**environment, "AWS_DEFAULT_REGION": "us-east-1"},
        )
        return float(result.stdout.strip())

    return statistics.median(timed(code) for _ in range(runs))


def artifact() -> dict[str, int]:
    """Build the artifact as `sam build` does (the Makefile target) and measure it."""
    with tempfile.TemporaryDirectory() as scratch:
        target = build(Path(scratch) / "artifact")
        files = [path for path in target.rglob("*") if path.is_file()]
        unpacked = sum(path.stat().st_size for path in files)
        archive = Path(scratch) / "artifact.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
            for path in files:
                bundle.write(path, path.relative_to(target))
        has_matplotlib = any(part == "matplotlib" for path in files for part in path.parts)
        return {
            "unpacked": unpacked,
            "zipped": archive.stat().st_size,
            "files": len(files),
            "matplotlib": int(has_matplotlib),
        }


def run(runs: int = 7) -> dict[str, Any]:
    """Import times (median of ``runs`` fresh interpreters) and the artifact's size."""
    return {
        "imports": {label: import_seconds(code, runs) for label, code in IMPORTS.items()},
        "runs": runs,
        "artifact": artifact(),
    }
