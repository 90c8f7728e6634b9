"""The CLI reference (docs/cli.md) says what `--help` says: every command, every option, nothing stale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dispatcher import cli as cli_module

REFERENCE = Path(__file__).parents[2] / "docs" / "cli.md"
COMMON = frozenset({"--help", "--stack", "--region", "--endpoint-url", "--json"})
OPTION = re.compile(r"--[a-z][a-z-]*")


def help_of(arguments: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``--help`` prints for ``arguments`` (it exits 0)."""
    with pytest.raises(SystemExit) as exit_status:
        cli_module.main([*arguments, "--help"])
    assert exit_status.value.code == 0
    return capsys.readouterr().out


def usage(text: str) -> str:
    """The usage block of a help text (up to the first blank line)."""
    return text.split("\n\n", 1)[0]


def commands(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The commands `dispatcher --help` lists (indented four spaces under COMMAND)."""
    return re.findall(r"^    ([a-z][a-z-]*)", help_of([], capsys), flags=re.MULTILINE)


def rows(name: str) -> str:
    """The reference's rows whose command cell is ``name``, with the FILTERS paragraph if they name it."""
    reference = REFERENCE.read_text()
    table = [line for line in reference.splitlines() if line.startswith("|")]
    found = [line for line in table if re.search(rf"`dispatcher {name}[` ]", line.split("|")[1])]
    text = " ".join(found)
    if "FILTERS" in text:
        text += next(paragraph for paragraph in reference.split("\n\n") if paragraph.startswith("`FILTERS`"))
    return text


def test_the_reference_names_every_command_and_the_common_options(capsys: pytest.CaptureFixture[str]) -> None:
    """Each command `dispatcher --help` lists has a row; the options every command takes are described."""
    names = commands(capsys)
    assert len(names) == 18
    assert [name for name in names if not rows(name)] == []
    reference = REFERENCE.read_text()
    assert [option for option in sorted(COMMON - {"--help"}) if option not in reference] == []


def test_each_command_row_has_exactly_the_options_of_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Every option a command's `--help` lists is in its row, and its row names no option it doesn't take."""
    for name in commands(capsys):
        options = set(OPTION.findall(usage(help_of([name], capsys)))) - COMMON
        documented = set(OPTION.findall(rows(name))) - COMMON
        assert (name, sorted(options - documented)) == (name, [])
        assert (name, sorted(documented - options)) == (name, [])
