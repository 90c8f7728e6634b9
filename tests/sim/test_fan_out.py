"""A round's receives in parallel follow what the queue hands out: none wasted on a group in flight."""

from __future__ import annotations

import json

import pytest

from dispatcher.core.batching import PROBE_EVERY, ROUND_SIZE, SQS_BATCH_LIMIT
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.deployment import function

pytestmark = pytest.mark.no_cover
"""Scale and whole runs of the in-memory AWS: untraced (tracing doubles a test's CPU time, and the
same lines run, measured, in tests/unit and tests/integration; CONTRIBUTING, "The suite's time")."""

JOBS = 1000
LAYOUTS = {
    "one group": lambda job: "g0",
    "10 groups, each in a block": lambda job: f"g{job // 100}",
    "every job its own group": lambda job: f"g{job}",
    "20 groups, round robin": lambda job: f"g{job % 20}",
}


def drain(layout: str) -> tuple[int, dict[str, int]]:
    """1,000 long jobs at MAX 1,000, one invocation: the starts and the calls by operation."""
    aws = InMemoryAws()
    for job in range(JOBS):
        aws.queue.send(json.dumps({"job": job, "seconds": 600}), LAYOUTS[layout](job))
    dispatcher = function(aws, JOBS)
    dispatcher.invoke({})
    aws.scheduler.run_until(aws.scheduler.now + 120)
    aws.scheduler.stop()
    assert aws.scheduler.errors == dispatcher.errors == []
    assert aws.world.violations == []
    return len(aws.started()), dict(aws.usage.calls)


def test_one_group_receives_once_a_round_after_the_first_and_probes_rarely() -> None:
    """One group in flight at a time: 9 empty receives once, then one probe every 8 rounds (was 9 a round)."""
    starts, calls = drain("one group")
    rounds = JOBS // SQS_BATCH_LIMIT
    assert starts == JOBS
    assert calls["StartExecution"] == JOBS
    assert calls["ReceiveMessage"] <= rounds + (ROUND_SIZE // SQS_BATCH_LIMIT - 1) + rounds // PROBE_EVERY
    assert sum(calls.values()) / starts < 1.35


@pytest.mark.parametrize("layout", ["10 groups, each in a block", "every job its own group"])
def test_layouts_that_hand_out_ten_groups_at_once_keep_the_full_fan_out(layout: str) -> None:
    """Every receive of a round comes back full: ten a round, 1.25 calls per start at most."""
    starts, calls = drain(layout)
    assert starts == JOBS
    assert calls["ReceiveMessage"] == JOBS // SQS_BATCH_LIMIT
    assert sum(calls.values()) / starts <= 1.25


def test_groups_round_robin_waste_few_receives() -> None:
    """20 groups interleaved: a receive takes a group's next messages only once the last are deleted."""
    starts, calls = drain("20 groups, round robin")
    assert starts == JOBS
    assert calls["ReceiveMessage"] < 1.5 * JOBS // SQS_BATCH_LIMIT
