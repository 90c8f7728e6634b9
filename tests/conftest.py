"""Fixtures shared by every test layer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dispatcher import handler
from tools.emulator import FAKE_CREDENTIALS


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials, no X-Ray, no real endpoint, and a cold start for every test."""
    for key, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    for key in (
        "AWS_ENDPOINT_URL",
        "AWS_PROFILE",
        "QUEUE_URL",
        "DEAD_LETTER_QUEUE_URL",
        "STATE_MACHINE_ARN",
        "MAX_CONCURRENCY",
        "STATE_TABLE",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    handler.reset_clients()
    yield
    handler.reset_clients()
