"""The dispatcher function deployed on the in-memory AWS: its settings, and a backlog to drain."""

from __future__ import annotations

import json

from dispatcher.settings import Settings
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import EventSourceMapping, Function


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
