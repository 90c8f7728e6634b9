"""`dispatcher ARGUMENTS` and `python -m dispatcher.local ...` run in this process as a process would.

A process's start costs more than most commands (a second with coverage): the CLI's tests
and the docs' sessions run the command here, with the environment, standard input and
folder a process would have had, and what a process would leave behind (the handler's
clients, the variables a tick here sets) goes with it. The installed script itself is run
in a process by the tests that are about it (tests/cli/conftest.py, ``Cli.spawn``).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dispatcher import cli as cli_module
from dispatcher import handler
from dispatcher.local import helpers


def run_cli(
    arguments: list[str], environment: dict[str, str], *, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``dispatcher ARGUMENTS`` here: its exit status, standard output and standard error."""
    return run_here(
        lambda out: cli_module.main(arguments, out=out), arguments, environment, stdin=stdin, cwd=cwd
    )


def run_local_helper(
    arguments: list[str], environment: dict[str, str], *, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m dispatcher.local ARGUMENTS`` (`downstream`, `settle`, `gated`) here, as `run_cli`."""
    return run_here(lambda _: helpers.main(arguments), arguments, environment, cwd=cwd)


def run_here(
    main: Callable[[io.StringIO], int],
    arguments: list[str],
    environment: dict[str, str],
    *,
    stdin: str = "",
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``main`` (given its standard output) run here as its process would run: status, output, errors."""
    out, errors = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(environment)
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(errors),
            pytest.MonkeyPatch.context() as patch,
        ):
            patch.setattr("sys.stdin", io.StringIO(stdin))
            if cwd is not None:
                patch.chdir(cwd)
            try:
                status = main(out)
            except SystemExit as exit_status:  # argparse's own usage errors, and --help
                status = int(exit_status.code or 0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        handler.reset_clients()
    return subprocess.CompletedProcess(arguments, status, out.getvalue(), errors.getvalue())
