"""Lanes for the unit tests: one account's ARNs and queue URLs, a `LANES` entry, `parse_lanes`."""

from __future__ import annotations

import json
from typing import Any

from dispatcher.core.lanes import parse_lanes
from dispatcher.core.topology import DEFAULT, Lane

ACCOUNT = "123456789012"


def arn(name: str) -> str:
    """A state machine ARN called ``name``."""
    return f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:{name}"


def queue(name: str) -> str:
    """A FIFO queue URL called ``name``."""
    return f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/{name}.fifo"


ENVIRONMENT_LANE = Lane(
    name=DEFAULT,
    pool=DEFAULT,
    queue_url=queue("jobs"),
    dead_letter_queue_url=queue("dead-letters"),
    state_machine_arn=arn("jobs"),
)


def lane(name: str, machine: str | None = None, **more: Any) -> dict[str, Any]:
    """A lane's document, its queues named after it."""
    return {
        "name": name,
        "queue_url": queue(name),
        "dead_letter_queue_url": queue(f"{name}-dead-letters"),
        "state_machine_arn": arn(machine or name),
        **more,
    }


def parse(document: Any) -> Any:
    """``document`` parsed as ``LANES`` beside the environment's lane, MAX 10."""
    return parse_lanes(json.dumps(document), ENVIRONMENT_LANE, 10)
