"""The tests' own house rules: helpers live in `tests/support` or a conftest, never in a test module.

A test module that imports another test module runs that module's tests' imports (and
fixtures, by name) wherever it goes, and a helper there is found by nobody looking for it.
`tests/support` is where shared helpers live; fixtures live in the conftest of the tests
that use them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).parents[1]


def suite_imports(path: Path) -> Iterator[str]:
    """Every ``tests.…`` module that ``path`` imports, at any level of its code."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("tests."))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests."):
            module = node.module or ""
            yield from (f"{module}.{alias.name}" for alias in node.names)
            yield module


def is_test_or_conftest(module: str) -> bool:
    """Whether a dotted name is (or is inside) a test module or a conftest."""
    return any(part.startswith("test_") or part == "conftest" for part in module.split("."))


def test_no_module_of_the_suite_imports_a_test_module_or_a_conftest() -> None:
    """Test modules, conftests, `tests/support` and the fault harness import helpers from support only."""
    found = sorted(
        f"{path.relative_to(TESTS.parent)} imports {module}"
        for path in TESTS.rglob("*.py")
        for module in set(suite_imports(path))
        if is_test_or_conftest(module)
    )
    assert found == []


@pytest.mark.parametrize(
    ("module", "wrong"),
    [
        ("tests.cli.conftest", True),
        ("tests.integration.test_tick.Harness", True),
        ("tests.support.moto_harness", False),
        ("tests.faults.run", False),
    ],
)
def test_the_rule_knows_a_test_module_and_a_conftest_from_a_helper(module: str, wrong: bool) -> None:
    """The check above would catch the imports it is there to catch."""
    assert is_test_or_conftest(module) is wrong
