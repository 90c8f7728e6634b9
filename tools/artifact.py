"""The Lambda artifact, built as `sam build` builds it: the Makefile's target, arm64 wheels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def build(target: Path) -> Path:
    """Install the package and its runtime dependencies into ``target``; return it."""
    subprocess.run(  # noqa: S603 — our own Makefile target, as `sam build` calls it
        [  # noqa: S607
            "make",
            "--no-print-directory",
            "build-DispatcherFunction",
            f"ARTIFACTS_DIR={target}",
            f"PYTHON={sys.executable}",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return target
