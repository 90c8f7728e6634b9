"""Pacing: the dispatcher keeps each scarce API below AWS's bucket instead of being throttled into its pace.

botocore's standard retry mode retries a throttled call (three attempts, with
exponential backoff and jitter), which keeps a throttle from failing a tick; it does
not keep throttles rare. At a sustained rate above a bucket's refill every call past
the burst is throttled, and each retry spends another token of the same bucket. So the
tick takes its own tokens first, from a bucket a little smaller than AWS's, and AWS's
throttle stays what it is for: the rare case where something else on the account
spends the same quota.

Time arrives as ``now`` (epoch seconds); nothing here reads a clock or sleeps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dispatcher.core.quotas import Bucket, step_functions

START_SHARE = 0.95
"""`StartExecution` is the dispatcher's own work: it takes 95 % of the refill, and half the burst;
so does `SendTaskSuccess`, the gates' admissions."""
DESCRIBE_SHARE = 0.25
"""`DescribeExecution` resolves only what nothing else can (a start the list doesn't show, of
which no end event came): a quarter of the refill (at most 0.02 calls a start at 90 % of
`StartExecution`'s), so the CLI and the re-run planner, which describe too, keep the rest."""
LIST_SHARE = 0.3
"""`ListExecutions`: 1.5 pages a second in the large regions, 0.6 elsewhere; a listing of
MAX 3,000 is three pages, so it is read every 2 s, or every 5 s. Between reads the tick
reuses the last listing (`LISTING_MAX_AGE_SECONDS`)."""
LIST_BURST_PAGES = 3.0
"""One listing of MAX 3,000 at once, no more: a new lease keeper's full bucket is no burst."""
LISTING_MAX_AGE_SECONDS = 30.0
"""A listing is reused while the `ListExecutions` pace has no tokens, up to this age; then it
is read anyway. Reuse keeps the cap for everything the dispatcher starts: starts recorded
since count (`review_from` keeps them), ends since come from events, an execution that
ended since still counts. What the age bounds is how long a correction waits: an end whose
event was lost, and an execution someone else started, which the dispatcher sees only in
a listing (after AWS's own lag of up to a minute). At 1.5 pages a second shared by 20
state machines of one page each, each is read every 13 s; at 0.6 (the smaller regions),
every 33 s, so this bound reads a few early: 0.67 pages a second in all."""
START_THREADS_LOWEST, START_THREADS_HIGHEST = 4, 32
ROUND_PHASES = 3.0
"""Start threads idle while a round receives, records and deletes: about two thirds of its time."""
FIRST_LATENCY_SECONDS = 0.05
"""`StartExecution`'s round trip assumed until one is measured."""


@dataclass
class Pace:
    """A token bucket of ``rate`` calls a second and ``burst`` at once, owed into when reserved ahead."""

    rate: float
    burst: float
    tokens: float = field(init=False)
    """Calls that may go now; below 0 when reserved ahead."""
    at: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def _refill(self, now: float) -> None:
        if self.at is not None and now > self.at:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now if self.at is None else max(self.at, now)

    def take(self, now: float, wanted: int) -> int:
        """Up to ``wanted`` calls that may go now (whole tokens only)."""
        self._refill(now)
        granted = max(0, min(wanted, math.floor(self.tokens)))
        self.tokens -= granted
        return granted

    def ready(self, now: float, calls: int) -> bool:
        """Whether ``calls`` calls (at most a full bucket) may go now; nothing is taken."""
        self._refill(now)
        return self.tokens >= min(calls, self.burst)

    def reserve(self, now: float, calls: int) -> float:
        """Reserve ``calls`` calls; how many seconds to wait before making them (0: at once)."""
        self._refill(now)
        self.tokens -= calls
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


def _shared(bucket: Bucket, share: float, burst_share: float) -> Pace:
    return Pace(rate=bucket.refill * share, burst=max(1.0, bucket.size * burst_share))


def _paced(bucket: Bucket, share: float, *, burst_seconds: float) -> Pace:
    """A steady share: a new lease keeper's full bucket adds little to the previous one's calls."""
    rate = bucket.refill * share
    return Pace(rate=rate, burst=max(1.0, rate * burst_seconds))


@dataclass
class Paces:
    """The tick's own buckets for one state machine's region."""

    start: Pace
    describe: Pace
    list: Pace
    admit: Pace
    """`SendTaskSuccess`: a gate's admissions, paced as starts are."""

    @classmethod
    def of_region(cls, region: str) -> Paces:
        """Below Step Functions' buckets in ``region``."""
        buckets = step_functions(region)
        return cls(
            start=_shared(buckets["StartExecution"], START_SHARE, 0.5),
            describe=_paced(buckets["DescribeExecution"], DESCRIBE_SHARE, burst_seconds=10.0),
            list=Pace(rate=buckets["ListExecutions"].refill * LIST_SHARE, burst=LIST_BURST_PAGES),
            admit=_shared(buckets["SendTaskSuccess"], START_SHARE, 0.5),
        )


def region_of(arn: str) -> str:
    """The region field of an ARN (``arn:partition:service:region:account:resource``)."""
    return arn.split(":")[3]


def quota_scope(arn: str) -> str:
    """What Step Functions' quotas are per: the ARN's account and region (``account:region``).

    Every state machine of an account in a region spends the same buckets, so the tick's
    own paces are kept once per scope, not once per state machine.
    """
    fields = arn.split(":")
    return f"{fields[4]}:{fields[3]}"


def start_threads(rate: float, latency_seconds: float) -> int:
    """Start threads enough to make ``rate`` starts a second at this round trip, between 4 and 32.

    One thread makes 1 / latency starts a second while it has work; it has work about a
    third of a round (`ROUND_PHASES`).
    """
    wanted = math.ceil(rate * latency_seconds * ROUND_PHASES)
    return max(START_THREADS_LOWEST, min(START_THREADS_HIGHEST, wanted))


@dataclass
class Latency:
    """A moving average of one call's round trip (seconds)."""

    seconds: float = FIRST_LATENCY_SECONDS
    weight: float = 0.1

    def observe(self, seconds: float) -> None:
        """Fold in one measured round trip."""
        self.seconds += self.weight * (max(0.0, seconds) - self.seconds)
