"""What a warm Lambda container remembers between invocations.

None of it is needed for correctness: a cold start has none of it and ticks the same.
It saves calls when invocations come in bursts, as they do when every completed
execution sends a status change event: a `ListExecutions` read is reused for a short
while (the starts made since are in the state table, the ends come from events), and a
state machine found STANDARD is not described again, and the receives of a round follow
what the queue handed out last. The tick's own buckets (`Paces`) live here too: a
cold start begins with them full, as AWS's own buckets refill while nothing calls. And
which recorded starts `DescribeExecution` said run: one seen running since the listing in
use was read is not described again (it counts, as it would, until a fresher listing or
an end event tells).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dispatcher.core.batching import FanOut
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS, RunningListing
from dispatcher.core.lane_rosters import KeptRoster
from dispatcher.core.pacing import Latency, Paces, quota_scope, region_of

SEEN_RUNNING_LIMIT = 10_000
"""Past this many names seen running, those older than the review window are dropped."""
ADMITTED_TOKENS_LIMIT, ADMITTED_TOKENS_SECONDS = 50_000, 900.0
"""Past this many tokens known admitted, those older than this are dropped (a request comes
again within its visibility timeout; one that comes later is asked about again, and refused)."""


@dataclass(frozen=True)
class Reconciliation:
    """A whole listing of a gate's state machine: when it was read, and how many pages it took."""

    at: float
    pages: int


@dataclass
class WarmState:
    """Reads one container may reuse across invocations."""

    standard: set[str] = field(default_factory=set)
    """State machine ARNs already found to exist and to be STANDARD."""
    listings: dict[str, RunningListing] = field(default_factory=dict)
    """State machine ARN → its latest RUNNING listing."""
    fan_outs: dict[str, FanOut] = field(default_factory=dict)
    """Lane → how many receives in parallel its queue was last seen to serve."""
    paces: dict[str, Paces] = field(default_factory=dict)
    """Account and region (`quota_scope`) → the tick's own buckets below Step Functions' there."""
    start_latency: Latency = field(default_factory=Latency)
    """`StartExecution`'s round trip, as measured."""
    seen_running: dict[str, float] = field(default_factory=dict)
    """Execution ARN → when `DescribeExecution` last said it runs (for the review window)."""
    turns: int = 0
    """Ticks that spent slots: which lane a round's batches go to first turns with each."""
    probed: dict[str, float] = field(default_factory=dict)
    """Gate → when it last looked for the requests of its pending admissions."""
    reconciled: dict[str, Reconciliation] = field(default_factory=dict)
    """Gate → its roster's latest whole listing of RUNNING executions."""
    rosters: dict[str, KeptRoster] = field(default_factory=dict)
    """Tenant lane → its roster as this container keeps it (read back when the head says it changed)."""
    admitted_tokens: dict[str, float] = field(default_factory=dict)
    """Digest of a task token → when `SendTaskSuccess` accepted it here: a request that comes
    again with it is known inside without asking (Step Functions would refuse it anyway)."""

    def fan_out(self, lane: str) -> FanOut:
        """What the receives of this lane's rounds follow."""
        return self.fan_outs.setdefault(lane, FanOut())

    def paces_for(self, state_machine_arn: str) -> Paces:
        """The buckets of this state machine's account and region, kept across warm invocations.

        Step Functions' quotas are per account and region: two state machines there spend
        one `StartExecution` bucket, so they share one set of paces.
        """
        scope = quota_scope(state_machine_arn)
        if scope not in self.paces:
            self.paces[scope] = Paces.of_region(region_of(state_machine_arn))
        return self.paces[scope]

    def listing(self, state_machine_arn: str, now: float, max_age: float) -> RunningListing | None:
        """The latest listing of the state machine if it is younger than ``max_age`` seconds."""
        listing = self.listings.get(state_machine_arn)
        if listing is None or not 0 <= now - listing.listed_at < max_age:
            return None
        return listing

    def listed_at(self, state_machine_arn: str) -> float | None:
        """When the latest listing of the state machine was read (None: never in this container)."""
        listing = self.listings.get(state_machine_arn)
        return None if listing is None else listing.listed_at

    def keep(self, state_machine_arn: str, listing: RunningListing) -> None:
        """Remember a fresh listing."""
        self.listings[state_machine_arn] = listing

    def saw_running(self, execution: str, now: float) -> None:
        """A `DescribeExecution` made at ``now`` said this execution (its ARN) runs."""
        self.seen_running[execution] = now
        if len(self.seen_running) > SEEN_RUNNING_LIMIT:
            oldest = now - RECENT_START_WINDOW_SECONDS
            self.seen_running = {key: at for key, at in self.seen_running.items() if at >= oldest}

    def admitted(self, token: str, now: float) -> None:
        """`SendTaskSuccess` accepted the token of this digest at ``now``."""
        self.admitted_tokens[token] = now
        if len(self.admitted_tokens) > ADMITTED_TOKENS_LIMIT:
            oldest = now - ADMITTED_TOKENS_SECONDS
            self.admitted_tokens = {key: at for key, at in self.admitted_tokens.items() if at >= oldest}

    def running_since(self, execution: str, moment: float) -> bool:
        """Whether a `DescribeExecution` made at ``moment`` or later said this execution (its ARN) runs."""
        return self.seen_running.get(execution, -1.0) >= moment

    def forget(self) -> None:
        """Forget everything, as a cold start does."""
        self.standard.clear()
        self.seen_running.clear()
        self.admitted_tokens.clear()
        self.probed.clear()
        self.reconciled.clear()
        self.rosters.clear()
        self.listings.clear()
        self.fan_outs.clear()
        self.paces.clear()
        self.start_latency = Latency()
