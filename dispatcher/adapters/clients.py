"""The function's boto3 clients: built once per container, never at import.

Tests (and moto) start before clients exist, and ``AWS_ENDPOINT_URL`` is honoured by boto3
itself, so the same code runs against AWS, an emulator or moto.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.loaders import Loader

from dispatcher.settings import MAX_START_CONCURRENCY

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_ssm import SSMClient
    from mypy_boto3_stepfunctions import SFNClient

ATTEMPTS = 4
"""botocore's standard retry mode backs off on throttling and 5xx; what is still failing after
these attempts is back-pressure for the tick, not a reason to loop."""
START_ATTEMPTS = 5
"""StartExecution is the one call made at a high rate from many threads, so it gets its own
client and one more attempt. Measured against a token bucket of AWS's shape (`make bench`),
standard mode sustains the refill rate better than adaptive mode: when the pool's threads
are throttled together, each throttle cuts adaptive mode's client-side rate again, and it
spends seconds far below the refill rate."""

CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": ATTEMPTS},
    connect_timeout=3,
    # Room for a 20 s long poll.
    read_timeout=25,
    user_agent_extra="dispatcher",
    # A connection per concurrent start, recording batch or delete batch.
    max_pool_connections=MAX_START_CONCURRENCY + 4,
)
START_CLIENT_CONFIG = CLIENT_CONFIG.merge(
    Config(retries={"mode": "standard", "max_attempts": START_ATTEMPTS})
)


class _SearchPaths(list[str]):
    """The folders service models are looked up in, each once (boto3 adds its own for each session)."""

    def append(self, path: str) -> None:
        """Add ``path`` unless it is there already."""
        if path not in self:
            super().append(path)


@cache
def service_models() -> Loader:
    """The service models of botocore, read from disk once a process and shared by its sessions.

    A session made afresh (a command of the CLI, a cold start in a test) otherwise parses
    the same model files again: a third of the time it takes to make its clients. The
    folders of ``AWS_DATA_PATH`` are searched first, as botocore's own loader does.
    """
    extra = os.environ.get("AWS_DATA_PATH", "")
    paths = [os.path.expanduser(os.path.expandvars(path)) for path in extra.split(os.pathsep) if path]
    return Loader(extra_search_paths=_SearchPaths(paths))


@dataclass(frozen=True)
class Clients:
    """The boto3 clients one container uses (thread-safe, shared by the start pool)."""

    stepfunctions: SFNClient
    starts: SFNClient
    sqs: SQSClient
    dynamodb: DynamoDBClient


def function_clients() -> Clients:
    """The clients the function calls AWS with."""
    return Clients(
        stepfunctions=boto3.client("stepfunctions", config=CLIENT_CONFIG),
        starts=boto3.client("stepfunctions", config=START_CLIENT_CONFIG),
        sqs=boto3.client("sqs", config=CLIENT_CONFIG),
        dynamodb=boto3.client("dynamodb", config=CLIENT_CONFIG),
    )


def ssm_client() -> SSMClient:
    """The SSM client for the control parameter (built only when one is configured)."""
    return boto3.client("ssm", config=CLIENT_CONFIG)
