"""An in-memory AWS per test, stopped afterwards (its waiting threads unwind)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import counted_logs


@pytest.fixture(autouse=True)
def _quiet_ticks() -> Iterator[None]:
    """The ticks' INFO lines go to a counter in every test, as the `aws` fixture sends its own."""
    with counted_logs("WARNING"):
        yield


@pytest.fixture
def aws() -> Iterator[InMemoryAws]:
    """AWS in memory, in virtual time, with us-east-1's quotas and 20 ms a call."""
    made = InMemoryAws()
    with counted_logs("WARNING"):
        yield made
    made.scheduler.stop()
    assert made.scheduler.errors == []
