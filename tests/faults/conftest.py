"""One faulty emulator for the session; each test gets its own resources and world."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dispatcher.local.server import enable_execution
from tests.support.faulty_aws import FaultyAws, faulty_moto_server


@pytest.fixture(scope="session")
def faulty_server() -> Iterator[tuple[str, FaultyAws]]:
    """Moto's HTTP server behind the fault-injecting middleware."""
    with faulty_moto_server() as server:
        yield server


@pytest.fixture
def faulty_aws(faulty_server: tuple[str, FaultyAws], monkeypatch: pytest.MonkeyPatch) -> FaultyAws:
    """Point boto3 (the tests' clients and the handler's) at the faulty emulator."""
    endpoint_url, middleware = faulty_server
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint_url)
    enable_execution(endpoint_url, enabled=False)  # other tests' servers may have turned it on
    return middleware
