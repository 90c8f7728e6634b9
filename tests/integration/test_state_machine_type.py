"""An EXPRESS state machine is refused: its executions can't be listed or counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from dispatcher.core.errors import ConfigurationError
from tests.support.moto_harness import Harness, make_harness


@pytest.fixture
def express_harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    """A harness whose state machine is EXPRESS."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": False}}):
        yield make_harness(monkeypatch, state_machine_type="EXPRESS")


def test_tick_refuses_express_state_machine(express_harness: Harness) -> None:
    """EXPRESS stops the tick with an error saying why; the message stays queued."""
    express_harness.send("{}")
    with pytest.raises(ConfigurationError, match="EXPRESS"):
        express_harness.tick()
    assert express_harness.queue_counts() == (1, 0)
