"""Fixtures shared by every test layer."""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from dispatcher import handler
from dispatcher.local.account import FAKE_CREDENTIALS
from dispatcher.local.server import (
    quick_serialize,
    share_service_models,
)
from dispatcher.settings import OPERATOR_FIELDS, Settings, variable
from tests.faults.tally import FINISHED, Tally
from tests.support.moto_harness import Harness, make_harness
from tests.support.quick_moto import quick_queries, quick_receipt_handles
from tests.support.tracing import libraries_traced, one_coverage_in_a_worker, untrace_libraries


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    """In-process moto; executions stay RUNNING until a test ends them."""
    # moto's execution switch is global to the process: say explicitly that it is off,
    # whatever an earlier test (or server) left it at.
    with mock_aws(config={"stepfunctions": {"execute_state_machine": False}}):
        yield make_harness(monkeypatch)


@pytest.fixture
def executing_harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    """In-process moto with state machines really running (a short Wait, then Succeed)."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield make_harness(monkeypatch, wait_seconds=1)


COLLECTOR_THRESHOLDS = 50_000, 20, 50
"""The cyclic garbage collector runs after 50,000 allocations, not 700, and rarely scans the whole heap.

A test process holds botocore's models, moto's backends and the clients of every harness
it made; with Python's defaults, each full collection walks all of it, and collections
took 15 % of a fault scenario's CPU. Cycles are still collected, later (CONTRIBUTING, "The
suite's time")."""

share_service_models()  # every session a test makes reads the models once a process
quick_serialize()  # moto in the test processes (`mock_aws`) too: tests/integration/test_emulator.py
quick_queries()  # these two in the test processes only: tests/integration/test_quick_moto.py
quick_receipt_handles()
untrace_libraries()  # coverage measures `dispatcher/`, not botocore or moto: tests/support/tracing.py
gc.set_threshold(*COLLECTOR_THRESHOLDS)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials, no X-Ray, no real endpoint, and a cold start for every test."""
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ENDPOINT_URL", "AWS_PROFILE", *Settings.variables(), *map(variable, OPERATOR_FIELDS)):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    handler.reset_clients()
    yield
    handler.reset_clients()


@pytest.fixture(autouse=True)
def _library_tracing(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `traced_libraries` runs with botocore and moto traced, as every other module."""
    with (
        libraries_traced()
        if request.node.get_closest_marker("traced_libraries")
        else contextlib.nullcontext()
    ):
        yield


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """In a pytest-xdist worker: one coverage only, so that a `no_cover` test is not traced."""
    plugin = session.config.pluginmanager.get_plugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    if getattr(session.config, "workerinput", None) is not None and controller is not None:
        one_coverage_in_a_worker(controller.cov)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand this worker's fault-scenario figures to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["fault_tally"] = json.dumps(FINISHED.as_dict())


def pytest_testnodedown(node: Any, error: Any) -> None:
    """In the pytest-xdist controller: add up the figures each worker sent."""
    data = getattr(node, "workeroutput", {}).get("fault_tally")
    if data:
        FINISHED.merge(Tally.from_dict(json.loads(data)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Figures of the fault scenarios this session ran, as `make soak` prints them."""
    if FINISHED.scenarios:
        terminalreporter.write_sep("-", f"fault scenarios: {FINISHED.scenarios}")
        for line in FINISHED.report():
            terminalreporter.write_line(line)
