"""An in-memory AWS per test, stopped afterwards (its waiting threads unwind)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from dispatcher.settings import Settings
from tests.integration.conftest import harness  # the moto harness, for the cross-check
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import EventSourceMapping, Function, counted_logs


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


__all__ = ["harness"]


def settings(aws: InMemoryAws, max_concurrency: int, **fields: object) -> Settings:
    """The function's settings for the in-memory stack (``fields``: more of them)."""
    return Settings.model_validate(
        {
            "queue_url": aws.queue.url,
            "dead_letter_queue_url": "dead-letters.fifo",
            "state_machine_arn": aws.state_machine_arn,
            "max_concurrency": max_concurrency,
            "state_table": "state",
            "receive_wait_seconds": 0,
            **fields,
        }
    )


def function(
    aws: InMemoryAws,
    max_concurrency: int,
    *,
    refill: bool = True,
    mapping: EventSourceMapping | None = None,
    **fields: object,
) -> Function:
    """The dispatcher function at MAX ``max_concurrency``; the world checks the cap at every start."""
    aws.world.max_concurrency = max_concurrency
    return Function(aws, settings(aws, max_concurrency, **fields), refill=refill, mapping=mapping)


def backlog(aws: InMemoryAws, jobs: int, *, groups: int, seconds: float = 10.0) -> None:
    """``jobs`` jobs, round robin over ``groups`` message groups, each running ``seconds``."""
    for job in range(jobs):
        aws.queue.send(json.dumps({"job": job, "seconds": seconds}), f"g{job % groups}")
