"""The Lambda artifact, built the way `sam build` builds it (no Docker)."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from tools.artifact import build


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Lambda artifact, built once per module (one xdist worker at a time)."""
    # pip builds the project in its source tree: two xdist workers building at once collide.
    lock = tmp_path_factory.getbasetemp().parent / "artifact-build.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        return build(tmp_path_factory.mktemp("artifact"))


@pytest.mark.slow
def test_artifact_holds_the_package_and_its_runtime_dependencies(artifact: Path) -> None:
    """The handler module and every runtime dependency are at the artifact's root."""
    for module in [
        "dispatcher/handler.py",
        "aws_lambda_powertools",
        "pydantic",
        "aws_xray_sdk",
        "boto3",
    ]:
        assert (artifact / module).exists(), module


@pytest.mark.slow
def test_artifact_is_built_for_python313_arm64(artifact: Path) -> None:
    """Compiled dependencies are the CPython 3.13 aarch64 builds the Lambda runtime loads."""
    [extension] = (artifact / "pydantic_core").glob("_pydantic_core*.so")
    assert "cpython-313-aarch64-linux-gnu" in extension.name
    assert extension.read_bytes()[18:20] == (183).to_bytes(2, "little")  # ELF e_machine: EM_AARCH64


@pytest.mark.slow
def test_artifact_leaves_out_tests_and_local_tools(artifact: Path) -> None:
    """Nothing that only runs locally (tests, the demo, the emulator, moto) ships in the Lambda."""
    for name in [
        "tests",
        "tools",
        "moto",
        "pytest",
        "_pytest",
        "dispatcher/local",
    ]:
        assert not (artifact / name).exists(), name
    assert (artifact / "dispatcher" / "handler.py").exists()
