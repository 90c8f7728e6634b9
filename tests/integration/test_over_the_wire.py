"""The handler against moto's HTTP server, with state machines really running."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

from dispatcher.local.server import moto_server
from tests.support.moto_harness import Harness, make_harness


@pytest.fixture(scope="module")
def endpoint_url() -> Iterator[str]:
    """A moto server on a real socket, for the module."""
    with moto_server(loopback=False) as url:
        yield url


@pytest.fixture
def wire(endpoint_url: str, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """A harness whose calls go over the wire to the moto server."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint_url)
    return make_harness(monkeypatch, wait_seconds=1)


def test_handler_drains_backlog_over_http_under_the_cap_in_order(wire: Harness) -> None:
    """Over the wire, ticks drain a backlog with RUNNING ≤ MAX (sampled), once each, in group order."""
    maximum, jobs = 3, 12
    wire.configure(maximum)
    groups: dict[str, list[int]] = defaultdict(list)
    for job in range(jobs):
        group = f"g{job % 3}"
        groups[group].append(job)
        wire.send(json.dumps({"job": job}), group=group)
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(wire.running())
            stop.wait(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            wire.tick()
            if wire.queue_counts() == (0, 0) and wire.running() == 0:
                break
            time.sleep(0.3)
    finally:
        stop.set()
        sampler.join()
    executions = wire.executions()
    assert wire.queue_counts() == (0, 0)
    assert len(executions) == jobs
    assert {execution["status"] for execution in executions} == {"SUCCEEDED"}
    assert len({execution["name"] for execution in executions}) == jobs
    assert max(samples) == maximum
    assert wire.started_by_group(lambda job: f"g{job % 3}") == groups


def test_handler_reuses_the_slot_of_a_quickly_finished_execution(wire: Harness) -> None:
    """An execution that ends within a second frees its slot for the next tick, not 60 s later."""
    wire.configure(1)
    for job in range(2):
        wire.send(json.dumps({"job": job}), group=f"g{job}")
    assert wire.tick()["started"] == 1
    deadline = time.monotonic() + 60
    while wire.executions("RUNNING") and time.monotonic() < deadline:
        time.sleep(0.1)  # moto runs the 1 s workflow: wait until it has ended, however slow the machine
    assert [execution["status"] for execution in wire.executions()] == ["SUCCEEDED"]
    second = wire.tick()
    assert second["running"] == 0
    assert second["started"] == 1
