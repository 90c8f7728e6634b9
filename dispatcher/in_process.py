"""The real handler, run in this process: for `dispatcher tick`, `dispatcher local`, the demo and tests.

Shipped with the CLI (it needs the function's own dependencies, the ``function`` extra);
nothing here is local-only.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from typing import Any

TICK_TIMEOUT_SECONDS = 60.0
"""A tick run here gets the deployed function's timeout."""


class LocalContext:
    """The part of Lambda's context object the handler uses, with a real deadline."""

    function_name = "dispatcher-local"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:dispatcher-local"

    def __init__(self, timeout_seconds: float = 30.0) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before this invocation would time out."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def tick_here(
    variables: dict[str, str], log_level: str, event: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run one tick of the real handler in this process: its environment set, logs on stderr, metrics off.

    ``event``: what invokes it (a batch of ends and releases, say); a manual tick's ``{}`` by default.
    """
    os.environ.update({**variables, "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": log_level})
    # Imported once the environment is set: Powertools reads it at import.
    from dispatcher import handler  # noqa: PLC0415
    from dispatcher.telemetry import logger, metrics  # noqa: PLC0415

    for log_handler in logger.handlers:
        if isinstance(log_handler, logging.StreamHandler):
            # Swapped, not `setStream`: that flushes the stream it replaces, which an earlier
            # caller in this process (a test's output capture) may have closed since.
            log_handler.stream = sys.stderr
    logger.setLevel(log_level)
    report = dict(handler.lambda_handler(event or {}, LocalContext(TICK_TIMEOUT_SECONDS)))
    # Disabled metrics still pile up in Powertools (and print once there are 100).
    metrics.clear_metrics()
    return report
