"""The docs' sample sessions reproduce: every ```console block runs against `dispatcher local`.

Each page with console blocks gets a fresh emulator, started as the page says
(``make local LOCAL_ARGS="..."``: a ``$ make local`` block's own, else the first the page
names), and a shell holding only the exports it prints; a command that writes a file (a
``--lanes`` file it reads, say) runs first, in the same folder.
Every ``$`` command of the page's blocks runs there in order, as a user pastes it
(stdout and stderr together, as a terminal shows them; a plain ``dispatcher ...`` in
this process, as `run_step` says), and its output must be the lines printed under it.
Masked, because they differ from run to run: times, ids, the emulator's port and the age
in `status`. Lines are compared as a sorted list: executions started together end, and
are listed, in any order. A ``$ make local`` block is the
emulator's own start-up output.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.in_process import run_cli, run_local_helper

pytestmark = pytest.mark.no_cover
"""Journeys, not line tests: each page's session replays what the CLI's focused tests run,
measured (measured, these pages added 1 line of 7,688 to the suite's coverage; CONTRIBUTING,
"The suite's time")."""

ROOT = Path(__file__).parents[2]
PAGES = sorted(
    path for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")] if "```console" in path.read_text()
)
DOCUMENTED_PORT = "127.0.0.1:4567"
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
LOCAL_ARGS = re.compile(r'make local LOCAL_ARGS="([^"]*)"')
WRITES_FILE = re.compile(r"cat > \S+ <<")
PLAIN_DISPATCHER = re.compile(r"dispatcher [^|<>;&$`\n*?]*")
PLAIN_HELPER = re.compile(r"python -m dispatcher\.local [^|<>;&$`\n*?#]*(#[^\n]*)?")
"""``python -m dispatcher.local ARGUMENTS``, a comment after it or not: run here, as a plain `dispatcher`."""
MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\dZ?"), "<time>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    # `status`: the last cell of its row (after MAX and PAUSED) is the oldest execution's age.
    (re.compile(r"^(\s*\d+\s+(?:yes|no)\s.*?)\s+(\d+h\d\dm|\d+m\d\ds|\d+s|-)$"), r"\1 <age>"),
]
BIN = Path(sys.executable).parent


@dataclass
class Step:
    """One ``$`` command of a page and the lines printed under it."""

    command: str
    line: int
    expected: list[str] = field(default_factory=list)


def steps(page: str) -> list[Step]:
    """The page's console commands in order, each with its documented output."""
    found: list[Step] = []
    lines = iter(enumerate(page.splitlines(), start=1))
    inside = False
    for number, text in lines:
        if text.startswith("```"):
            inside = text == "```console"
            continue
        if not inside:
            continue
        if text.startswith("$ "):
            command = text[2:]
            heredoc = HEREDOC.search(command)
            if heredoc:
                body = []
                for _, more in lines:
                    body.append(more)
                    if more == heredoc.group(1):
                        break
                command = "\n".join([command, *body])
            found.append(Step(command, number))
        elif found:
            found[-1].expected.append(text)
    return found


def masked(lines: list[str], endpoint: str) -> list[str]:
    """Lines as compared: the documented port, volatile parts masked, sorted."""
    result = []
    for line in lines:
        text = line.rstrip().replace(endpoint, DOCUMENTED_PORT)
        for pattern, replacement in MASKS:
            text = pattern.sub(replacement, text)
        result.append(text)
    return sorted(result)


def shell_environment(exports: dict[str, str]) -> dict[str, str]:
    """A user's shell after the exports: the repository's `dispatcher` and `python` first on PATH."""
    return {
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", str(Path.home())),
        "PYTHONUNBUFFERED": "1",  # stdout and stderr in the order a terminal shows them
        **exports,
    }


@dataclass
class Emulator:
    """`dispatcher local`, as the page starts it: its start-up lines and its exports."""

    process: subprocess.Popen[str]
    startup: list[str]
    exports: dict[str, str]

    @property
    def endpoint(self) -> str:
        """host:port of the emulator."""
        return self.exports["AWS_ENDPOINT_URL"].removeprefix("http://")


@pytest.fixture
def emulator_for(tmp_path: Path) -> Iterator[list[Emulator]]:
    """Starts the emulator a page asks for; stops it with Ctrl-C (exit 0) at the end."""
    started: list[Emulator] = []
    yield started
    for emulator in started:
        emulator.process.send_signal(2)
        _, errors = emulator.process.communicate(timeout=60)
        assert emulator.process.returncode == 0, errors


def start(arguments: list[str], started: list[Emulator], cwd: Path) -> Emulator:
    """`dispatcher local` started as the docs start it, noted in ``started`` to be stopped."""
    process = subprocess.Popen(
        [str(BIN / "dispatcher"), "local", "--port", "0", *arguments],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=shell_environment({}),
    )
    emulator = Emulator(process, [], {})
    started.append(emulator)
    assert process.stdout is not None
    for line in iter(process.stdout.readline, ""):
        emulator.startup.append(line.rstrip("\n"))
        if line.strip().startswith("export "):
            key, _, value = line.strip().removeprefix("export ").partition("=")
            emulator.exports[key] = value
        if "Ctrl-C stops" in line:
            return emulator
    raise AssertionError(f"`dispatcher local` ended before it was ready: {process.communicate()}")


def test_the_pages_with_sessions_are_the_ones_users_follow() -> None:
    """The runbook, the re-run walk-through, Try it locally, the CLI reference and gates hold sessions."""
    assert {page.name for page in PAGES} >= {
        "operations.md",
        "reruns.md",
        "deploy-and-local.md",
        "cli.md",
        "gates.md",
    }
    for page in PAGES:
        assert steps(page.read_text()), page.name


def run_step(step: Step, cwd: Path, emulator: Emulator | None) -> list[str]:
    """One ``$`` command as a user pastes it (with the emulator's exports once it runs): what it prints.

    A plain ``dispatcher ARGUMENTS`` or ``python -m dispatcher.local ARGUMENTS`` (no pipe,
    redirection, loop or variable) runs in this process, in the shell's environment and
    folder (tests/support/in_process.py): the same output, without a process's start. Any
    other command runs in bash.
    """
    command = step.command if emulator is None else step.command.replace(DOCUMENTED_PORT, emulator.endpoint)
    environment = shell_environment({} if emulator is None else emulator.exports)
    if PLAIN_DISPATCHER.fullmatch(command):
        ran = run_cli(shlex.split(command)[1:], environment, cwd=cwd)
        return (ran.stdout + ran.stderr).splitlines()
    if PLAIN_HELPER.fullmatch(command):
        ran = run_local_helper(shlex.split(command, comments=True)[3:], environment, cwd=cwd)
        return (ran.stdout + ran.stderr).splitlines()
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
    )
    return result.stdout.splitlines()


def session(page: Path, cwd: Path, started: list[Emulator]) -> Iterator[tuple[Step, list[str], str]]:
    """Each step of the page, run, with what it printed and the emulator's endpoint.

    A step that writes a file (``cat > FILE <<'EOF'``: a ``--lanes`` file, say) runs first,
    in the folder the emulator then starts in, as the page says (its ``$ make local`` step,
    else the first ``make local LOCAL_ARGS`` it names); the others run against it in order.
    """
    text = page.read_text()
    every = steps(text)
    files = [step for step in every if WRITES_FILE.match(step.command)]
    for step in files:
        yield step, run_step(step, cwd, None), DOCUMENTED_PORT
    shown = [step.command for step in every if step.command.startswith("make local")]
    arguments = LOCAL_ARGS.search(shown[0] if shown else text)
    emulator = start(shlex.split(arguments.group(1)) if arguments else [], started, cwd)
    for step in every:
        if step in files:
            continue
        if step.command.startswith("make local"):
            yield step, emulator.startup, emulator.endpoint
        else:
            yield step, run_step(step, cwd, emulator), emulator.endpoint


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_console_session_reproduces_against_the_emulator(
    page: Path, tmp_path: Path, emulator_for: list[Emulator]
) -> None:
    """Each command's output, run as the page says, is the output the page prints."""
    for step, printed, endpoint in session(page, tmp_path, emulator_for):
        documented, got = masked(step.expected, endpoint), masked(printed, endpoint)
        difference = "\n".join(difflib.unified_diff(documented, got, "documented", "printed", lineterm=""))
        assert got == documented, f"{page.name}:{step.line}: $ {step.command.splitlines()[0]}\n{difference}"


DEMO_MASKS = [
    (re.compile(r"^tick\s+\d+"), "tick <n>"),
    (re.compile(r"in \d+ ticks \([\d.]+s\)"), "in <n> ticks"),
]


def test_the_readme_shows_what_make_demo_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """The quick start's sample: each line (tick numbers and the time masked) comes out, in that order."""
    from tools import demo  # noqa: PLC0415

    block = (
        (ROOT / "README.md")
        .read_text()
        .split("until the queue is\ndrained:\n\n```\n", 1)[1]
        .split("```", 1)[0]
    )
    # Jobs of a second and a tick each 0.3 s (the README's are 3 s and 1 s): the same lines,
    # ticks and checks, in a third of the waiting.
    assert demo.main(["--duration", "1", "--interval", "0.3"]) == 0

    def mask(lines: list[str]) -> list[str]:
        for pattern, replacement in DEMO_MASKS:
            lines = [pattern.sub(replacement, line.rstrip()) for line in lines]
        return lines

    printed = iter(mask(capsys.readouterr().out.splitlines()))
    missing = [line for line in mask(block.splitlines()) if line != "..." and line not in printed]
    assert missing == []
