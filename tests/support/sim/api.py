"""What a call to the in-memory AWS costs: a latency, a token from AWS's bucket, and botocore's retries.

Each call takes ``latency`` seconds of virtual time, then asks its buckets (a Step
Functions API's, a FIFO queue action's, a DynamoDB partition's write or read units) for
what it needs. Refused, it is a throttle, and the container's client retries it as
botocore's ``standard`` mode does: at most ``max_attempts`` attempts, a delay of
``random() * min(2 ** (attempt - 1), 20)`` seconds before each retry, and a retry quota of
500 (5 a retry, 1 back for each call that needed none, the cost back when a retried call
succeeds). What is still throttled after that raises `TransientError`, as the adapters do.
Every attempt is counted, as AWS counts (and bills) it.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from dispatcher.core.errors import DispatcherError, TransientError
from dispatcher.core.quotas import Bucket
from tests.support.sim.faults import Faults, Process
from tests.support.sim.scheduler import Scheduler

LATENCY_SECONDS = 0.02
"""Every call's round trip, as the other `make bench` sections assume."""
RETRY_QUOTA = 500
RETRY_COST = 5
BACKOFF_CAP_SECONDS = 20.0

Result = TypeVar("Result")


@dataclass
class LiveBucket:
    """A token bucket in virtual time."""

    size: float
    refill: float
    tokens: float = -1.0
    updated: float = 0.0

    def __post_init__(self) -> None:
        self.tokens = self.size if self.tokens < 0 else self.tokens

    @classmethod
    def of(cls, bucket: Bucket, now: float) -> LiveBucket:
        """A full bucket of AWS's shape."""
        return cls(bucket.size, bucket.refill, updated=now)

    def take(self, now: float, units: float = 1.0, *, partial: bool = False) -> float:
        """Take ``units`` tokens if there are (as many as there are, with ``partial``); how many it took."""
        self.tokens = min(self.size, self.tokens + max(0.0, now - self.updated) * self.refill)
        self.updated = max(self.updated, now)
        # Epoch seconds are coarse (0.24 µs apart): 20 ms at 1,000 a second is 20 tokens, not 19.99998.
        whole = math.floor(self.tokens + 1e-3)
        granted = min(units, float(whole)) if partial else (units if whole >= units else 0.0)
        self.tokens -= granted
        return granted


@dataclass
class Usage:
    """Every call the in-memory AWS served, as AWS would count it."""

    calls: Counter[str] = field(default_factory=Counter)
    """Operation → requests (each attempt of a retried call counts)."""
    throttles: Counter[str] = field(default_factory=Counter)
    units: Counter[str] = field(default_factory=Counter)
    """``WriteRequestUnits`` and ``ReadRequestUnits`` consumed on the state table."""
    partition_units: Counter[tuple[str, str]] = field(default_factory=Counter)
    """The same, by (partition key, kind of unit): each partition has its own quota."""

    def consume(self, partition: str, kind: str, units: float) -> None:
        """Count units of the state table consumed on one partition."""
        self.units[kind] += units
        self.partition_units[(partition, kind)] += units

    def reset(self) -> None:
        """Forget what was counted (after a warm-up)."""
        self.calls.clear()
        self.throttles.clear()
        self.units.clear()
        self.partition_units.clear()


class Client:
    """One boto3 client of one container: its attempts, its retry quota, and its process (which may die)."""

    def __init__(  # noqa: PLR0913 — what one client is made of
        self,
        scheduler: Scheduler,
        usage: Usage,
        rng: random.Random,
        *,
        service: str,
        max_attempts: int,
        latency: float,
        process: Process,
        faults: Faults,
    ) -> None:
        self._scheduler = scheduler
        self._usage = usage
        self._rng = rng
        self._service = service
        self._max_attempts = max_attempts
        self._latency = latency
        self._process = process
        self._faults = faults
        self._quota = RETRY_QUOTA

    def call(
        self,
        operation: str,
        action: str,
        admit: Callable[[], bool],
        effect: Callable[[], Result] = lambda: None,  # type: ignore[assignment,return-value]
        *,
        role: str | None = None,
    ) -> Result:
        """One API call: ``admit``: whether AWS serves it now (else, a throttle); ``effect``: what AWS does.

        ``role``: what a call is for, where one operation serves two (the crash points' names).
        A crash after the call comes once its effect is done, as when a response is lost.
        """
        step = f"{self._service}.{operation}" + (f":{role}" if role else "")
        nth = self._process.before(step)
        try:
            self._attempts(operation, action, admit)
            result = effect()
        except DispatcherError:
            self._process.after(step, nth)  # botocore's after-call comes for an error answer too
            raise
        self._process.after(step, nth)
        return result

    def _attempts(self, operation: str, action: str, admit: Callable[[], bool]) -> None:
        for attempt in range(1, self._max_attempts + 1):
            self._scheduler.sleep(self._latency)
            self._usage.calls[operation] += 1
            if not self._faults.throttled(operation) and admit():
                self._quota = min(RETRY_QUOTA, self._quota + (1 if attempt == 1 else RETRY_COST))
                return
            self._usage.throttles[operation] += 1
            if attempt == self._max_attempts or self._quota < RETRY_COST:
                break
            self._quota -= RETRY_COST
            delay = self._rng.random() * min(2.0 ** (attempt - 1), BACKOFF_CAP_SECONDS)
            self._scheduler.sleep(delay)
        raise TransientError(f"{action} failed with ThrottlingException: Rate exceeded")
