"""The two semaphores people build inside a workflow today, priced on a gate run's own waits.

Each execution of the gate's cost run waited some seconds at the gate; here the same
executions wait as long in each semaphore (as if it admitted them in the same order at the
same pace, which flatters it: neither can, see the quota verdicts), and what their waiting
costs is counted state by state:

- **Wait-loop**: a Task (a Lambda that pages through the section's RUNNING executions with
  `ListExecutions`, 1,000 a page), a Choice, and a 10 s Wait back to the Task: 3
  transitions a loop, and the last check and its Choice to get in.
- **DynamoDB counter**: a Task that takes a slot with a conditional `UpdateItem` (the
  service integration, no Lambda); a failed condition is caught into a 3 s Wait back to
  it: 2 transitions a loop, the successful Task to get in and one more to give it back.

Every approach spends 2 transitions to enter and leave the section (the gate: its
request and its release); they are priced apart from what waiting and admitting cost.
Modelled, not simulated: these are sums over the measured waits, with AWS's list prices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from benchmarks import prices
from dispatcher.core import quotas

WAIT_LOOP_SECONDS = 10.0
COUNTER_RETRY_SECONDS = 3.0
LIST_PAGE = 1000
LAMBDA_MEMORY_GB = 128 / 1024
CALL_SECONDS = 0.02
"""A call's round trip, as in the other sections."""
LAMBDA_OVERHEAD_SECONDS = 0.02
"""A check's own time besides its `ListExecutions` pages (billed by the millisecond)."""
TRANSITIONS_TO_ENTER_AND_LEAVE = 2


@dataclass(frozen=True)
class Semaphore:
    """What one approach costs for the executions of a run: counts per execution and a bill per million."""

    name: str
    transitions_waiting: float
    """State transitions per execution while it waits (mean)."""
    calls_per_second: dict[str, float]
    """The calls it would make each second at the run's pace, by API."""
    quota: dict[str, float]
    """Each API's sustained rate (Step Functions' refill; one DynamoDB item's write units)."""
    bill: list[tuple[str, float]]
    """Per million admissions: what waiting and admitting cost, line by line."""

    @property
    def mechanism(self) -> float:
        """The bill of waiting and admitting, per million admissions."""
        return sum(amount for _, amount in self.bill)

    @property
    def all_in(self) -> float:
        """With the 2 transitions every approach spends to enter and leave."""
        return self.mechanism + enter_and_leave()

    def throttled(self) -> list[str]:
        """The APIs it would need faster than their quota, each with the rates."""
        return [
            f"{api} {rate:,.0f}/s of {self.quota[api]:,.0f}"
            for api, rate in self.calls_per_second.items()
            if rate > self.quota[api]
        ]


def enter_and_leave() -> float:
    """Per million admissions: the 2 transitions of entering and leaving the section."""
    return TRANSITIONS_TO_ENTER_AND_LEAVE * prices.PER_MILLION * prices.STEP_FUNCTIONS_TRANSITION


def wait_loop(waits: list[float], seconds: float, max_concurrency: int, region: str) -> Semaphore:
    """The Wait-loop semaphore over ``waits`` (each execution's, s), admitted over ``seconds``."""
    loops = [math.floor(wait / WAIT_LOOP_SECONDS) for wait in waits]
    checks = sum(loops) + len(waits)
    pages = max(1, math.ceil(max_concurrency / LIST_PAGE))
    per_million = prices.PER_MILLION / max(1, len(waits))
    duration = pages * CALL_SECONDS + LAMBDA_OVERHEAD_SECONDS
    return Semaphore(
        name=f"Wait-loop ({WAIT_LOOP_SECONDS:.0f} s)",
        transitions_waiting=3 * sum(loops) / max(1, len(waits)),
        calls_per_second={"ListExecutions": checks * pages / seconds},
        quota={"ListExecutions": quotas.step_functions(region)["ListExecutions"].refill},
        bill=[
            (
                "Step Functions: transitions while waiting",
                3 * sum(loops) * per_million * prices.STEP_FUNCTIONS_TRANSITION,
            ),
            ("Lambda requests (a check a loop)", checks * per_million * prices.LAMBDA_REQUEST),
            (
                f"Lambda duration (128 MB, Arm; {pages} pages a check)",
                checks * duration * LAMBDA_MEMORY_GB * per_million * prices.LAMBDA_ARM_GB_SECOND,
            ),
        ],
    )


def counter(waits: list[float], seconds: float, region: str) -> Semaphore:
    """The DynamoDB counter semaphore over ``waits``: an attempt every 3 s, one write unit each."""
    del region  # a DynamoDB item's write units are the same everywhere
    loops = [math.floor(wait / COUNTER_RETRY_SECONDS) for wait in waits]
    attempts = sum(loops) + len(waits)
    per_million = prices.PER_MILLION / max(1, len(waits))
    writes = attempts + len(waits)  # every attempt, and each release
    return Semaphore(
        name=f"DynamoDB counter ({COUNTER_RETRY_SECONDS:.0f} s)",
        transitions_waiting=2 * sum(loops) / max(1, len(waits)),
        calls_per_second={"UpdateItem on the counter": writes / seconds},
        quota={"UpdateItem on the counter": quotas.DYNAMODB_PARTITION_WRITES.refill},
        bill=[
            (
                "Step Functions: transitions while waiting",
                2 * sum(loops) * per_million * prices.STEP_FUNCTIONS_TRANSITION,
            ),
            (
                "DynamoDB write units (a failed condition is one)",
                writes * per_million * prices.DYNAMODB_WRITE_UNIT,
            ),
        ],
    )


def gate(result: dict[str, Any], bill: list[tuple[str, float]]) -> Semaphore:
    """The gate as measured: no transition while waiting; its bill without the 2 to enter and leave."""
    seconds = result["seconds"]
    region = result["region"]
    limits = quotas.step_functions(region)
    return Semaphore(
        name="the gate",
        transitions_waiting=0.0,
        calls_per_second={
            api: result["calls"].get(api, 0) / seconds for api in ("ListExecutions", "SendTaskSuccess")
        },
        quota={api: limits[api].refill for api in ("ListExecutions", "SendTaskSuccess")},
        bill=bill,
    )
