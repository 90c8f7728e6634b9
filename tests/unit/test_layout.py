"""The house's rules, on the code: no cycles, a pure core, nothing local-only shipped, a light install."""

from __future__ import annotations

import ast
import functools
import io
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "dispatcher"
LOCAL_ONLY = frozenset({"moto", "flask", "werkzeug", "matplotlib"})
FUNCTION_ONLY = frozenset({"aws_lambda_powertools", "aws_xray_sdk", "pydantic_settings"})
IMPURE = frozenset(
    {"boto3", "botocore", "os", "time", "threading", "concurrent", "socket", "random", "subprocess"}
)


def module_name(path: Path) -> str:
    """The dotted module name of ``path``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


@functools.cache
def imports(name: str) -> tuple[str, ...]:
    """Every module ``name`` imports, at any level of its code (function-level imports too).

    Parsed once a module: the rules below walk the import graph many times.
    """
    return tuple(_imports(name))


def _imports(name: str) -> Iterator[str]:
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base]).strip(".")
            # `from package import module` imports that module; `from module import name`, the module.
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def internal(name: str) -> set[str]:
    """The dispatcher modules ``name`` imports."""
    found = set()
    for imported in imports(name):
        module = imported
        while module and module not in MODULES:
            module = module.rpartition(".")[0]
        if module and module not in {name, "dispatcher"}:
            found.add(module)
    return found


def external(name: str) -> set[str]:
    """The top-level packages outside dispatcher that ``name`` imports."""
    return {imported.split(".")[0] for imported in imports(name) if not imported.startswith("dispatcher")}


def reachable(name: str) -> set[str]:
    """Every dispatcher module ``name`` imports, directly or not."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for module in internal(todo.pop()):
            if module not in seen:
                seen.add(module)
                todo.append(module)
    return seen


SHIPPED = sorted(name for name in MODULES if not name.startswith("dispatcher.local"))
ENTRY_POINTS = frozenset({"dispatcher.cli.main", "dispatcher.cli.__main__"})
IMPORTABLE = [name for name in SHIPPED if not name.endswith("__main__")]
"""Modules that do nothing but define when imported."""


def test_no_shipped_module_is_over_400_lines() -> None:
    """A module that grows past 400 lines is split where it does two things (CONTRIBUTING)."""
    long = {
        name: lines for name, path in MODULES.items() if (lines := len(path.read_text().splitlines())) > 400
    }
    assert long == {}


GATE_NAMERS = frozenset(
    {
        "dispatcher.core.kinds",  # the kinds' registration
        "dispatcher.tick.kinds",  # the kinds' sides of the tick, registered
        "dispatcher.cli.status_kinds",  # the kinds' parts of `status`, registered
        "dispatcher.settings",  # the one home of the stack's output names
        "dispatcher.core.events",  # the one home of the events' keys (a release's "gate")
        "dispatcher.adapters.resources",  # boto3's ports, every kind's
        "dispatcher.cli.info",  # the stack's resources, a gate's release queue among them
        "dispatcher.cli.local",  # `dispatcher local --gate`
    }
)
"""The shipped modules outside the gate's own (a name with ``gate`` in it) that may name the gate."""
ANOTHER_WORD = ("aggregat", "delegat", "navigat", "propagat", "investigat", "mitigat", "obligat")


def names_the_gate(path: Path) -> bool:
    """Whether any name in the module's code (not its docstrings, comments or strings) says gate."""
    names = (
        token.string.lower()
        for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        if token.type == tokenize.NAME
    )
    return any("gate" in name and not any(word in name for word in ANOTHER_WORD) for name in names)


def test_only_the_gates_own_modules_and_the_registrations_name_the_gate() -> None:
    """Code that serves every kind asks the registry (`KINDS`), never "is it a gate?".

    A shipped module that names the gate either is the gate's own (``gate`` in its name) or
    is one of `GATE_NAMERS`: a registration, or the one home of a fact of the contract.
    """
    naming = {name for name in SHIPPED if "gate" not in name.split(".")[-1] and names_the_gate(MODULES[name])}
    assert naming <= GATE_NAMERS, f"name the gate only in its own modules: {sorted(naming - GATE_NAMERS)}"
    assert len(GATE_NAMERS) <= 10


def test_the_rule_sees_a_name_and_not_a_word() -> None:
    """A module that calls ``GateRound`` names the gate; ``aggregate`` and a docstring's "gate" don't."""
    assert names_the_gate(MODULES["dispatcher.tick.ticking"]) is False
    assert names_the_gate(MODULES["dispatcher.tick.kinds"]) is True


def test_no_module_imports_itself_back() -> None:
    """No import cycle inside dispatcher/, counting imports inside functions."""
    cycles = [name for name in MODULES if name in reachable(name)]
    assert cycles == []


@pytest.mark.parametrize("name", SHIPPED)
def test_no_shipped_module_reaches_a_local_only_package(name: str) -> None:
    """No shipped module imports moto, flask, werkzeug or matplotlib, at any depth of the package."""
    assert not {package for module in {name, *reachable(name)} for package in external(module) & LOCAL_ONLY}
    assert not any(module.startswith("dispatcher.local") for module in reachable(name))


def test_the_core_does_no_io_reads_no_clock_and_starts_no_thread() -> None:
    """dispatcher/core imports only the standard library's pure parts, pydantic and itself."""
    core = [name for name in MODULES if name.startswith("dispatcher.core")]
    assert {name: sorted(external(name) & IMPURE) for name in core if external(name) & IMPURE} == {}
    assert all(module.startswith("dispatcher.core") for name in core for module in internal(name))


def test_a_command_imports_no_other_command() -> None:
    """Each CLI module stands alone: only `main` brings the command groups together."""
    shared = {"dispatcher.cli.args", "dispatcher.cli.config", "dispatcher.cli.errors"}
    shared |= {"dispatcher.cli.output", "dispatcher.cli.progress"}
    shared |= {"dispatcher.cli.members", "dispatcher.cli.origins"}  # which member, which lane a failure's
    shared |= {"dispatcher.cli.groups"}  # status's view of message groups (no command of its own)
    shared |= {"dispatcher.cli.parameter", "dispatcher.cli.status_view"}  # the control parameter's writes
    shared |= {"dispatcher.cli.pool_limits"}  # adaptive pools' limits: status reads them, two commands write
    shared |= {"dispatcher.cli.pool_settings"}  # a pool's settings as set and unset change and say them
    # Each kind's part of status (its rows, its rosters), registered once in status_kinds.
    shared |= {"dispatcher.cli.kind_status", "dispatcher.cli.status_kinds"}
    shared |= {"dispatcher.cli.lane_status", "dispatcher.cli.gate_status"}
    for name in MODULES:
        if name.startswith("dispatcher.cli.") and name not in {
            "dispatcher.cli.main",
            "dispatcher.cli.__main__",
        }:
            assert {module for module in internal(name) if module.startswith("dispatcher.cli")} <= shared, (
                name
            )


def test_the_tick_depends_on_ports_not_adapters() -> None:
    """dispatcher/tick never imports an adapter: any AWS that satisfies its ports runs it."""
    tick = [name for name in MODULES if name.startswith("dispatcher.tick")]
    assert [name for name in tick if any(m.startswith("dispatcher.adapters") for m in reachable(name))] == []


PROBE = """
import importlib, importlib.abc, pkgutil, sys
blocked = set(sys.argv[1].split(","))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(name + " is not installed")
sys.meta_path.insert(0, Blocker())
for name in sys.argv[2].split(","):
    importlib.import_module(name)
print(",".join(sorted({name.split(".")[0] for name in sys.modules})))
"""


def probe(blocked: frozenset[str], modules: list[str]) -> set[str]:
    """Top-level modules loaded by importing ``modules`` anew where ``blocked`` are missing."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(sorted(blocked)), ",".join(modules)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return set(result.stdout.strip().split(","))


def test_shipped_modules_load_nothing_local_only_when_imported() -> None:
    """Importing every shipped module (the handler, the CLI, in_process) loads no local-only package."""
    loaded = probe(frozenset(), IMPORTABLE)
    assert not loaded & LOCAL_ONLY


def test_a_producer_and_the_cli_need_only_the_base_install() -> None:
    """Without Powertools, the X-Ray SDK or pydantic-settings, the producer and every CLI module import."""
    cli = [name for name in IMPORTABLE if name.startswith("dispatcher.cli")]
    loaded = probe(FUNCTION_ONLY | LOCAL_ONLY, ["dispatcher.producer", *cli])
    assert not loaded & FUNCTION_ONLY
