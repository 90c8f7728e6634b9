"""A producer's wakes: a tick on a job's arrival, without a tick per job (DESIGN.md, "Start on arrival").

After queueing jobs a producer sends ``{"wake": true}`` to the wake queue (the stack's
``WakeQueueUrl``: the end-event queue the function takes in batches), so a job sent to a
quiet dispatcher starts in seconds instead of at the next scheduled tick. One ``Waker``
sends at most one wake a second however many jobs its producer queues, and a wake that
can't be sent is a warning, never a failed send: the schedule still comes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.core.events import WAKE_INTERVAL_SECONDS, WAKE_KEY

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

WAKE_QUEUE_VARIABLE = "WAKE_QUEUE_URL"
"""The variable a producer finds the wake queue in when it isn't given one."""
WAKE_BODY = json.dumps({WAKE_KEY: True})

logger = logging.getLogger(__name__)


class Waker:
    """Wakes the dispatcher after jobs are queued: at most once a second, never failing (thread-safe)."""

    def __init__(
        self,
        client: SQSClient,
        queue_url: str | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval_seconds: float = WAKE_INTERVAL_SECONDS,
    ) -> None:
        """``queue_url``: the wake queue; None or empty: this producer sends no wakes."""
        self.queue_url = queue_url or None
        self._client = client
        self._clock = clock
        self._interval = interval_seconds
        self._last: float | None = None
        self._lock = threading.Lock()
        self.sent = 0
        """Wakes sent (a figure for tests and benchmarks)."""

    def wake(self) -> bool:
        """Send a wake unless one went less than a second ago (or there is no wake queue): whether one went.

        Call it after the jobs it wakes for are on the queue. A failure is logged as a
        warning and returns False; the next call may try again.
        """
        if self.queue_url is None:
            return False
        with self._lock:
            now = self._clock()
            if self._last is not None and now - self._last < self._interval:
                return False
            self._last = now
        try:
            self._client.send_message(QueueUrl=self.queue_url, MessageBody=WAKE_BODY)
        except (ClientError, BotoCoreError) as error:
            logger.warning(
                "could not wake the dispatcher: the jobs are queued and start at the next tick",
                extra={"wake_queue_url": self.queue_url, "error": str(error)},
            )
            return False
        self.sent += 1
        return True
