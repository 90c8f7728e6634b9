"""A round over several lanes: their receives at once, one first wave of starts, every lane's jobs safe."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dispatcher.core.errors import ConfigurationError
from dispatcher.local.stack import create_lane
from tests.support.harness import lanes, send, throttle_every_start
from tests.support.moto_harness import Harness


def three_lanes(harness: Harness, max_concurrency: int, jobs: int) -> list[dict[str, Any]]:
    """Lane default and two more in pool default (each its own state machine), ``jobs`` each, a group each."""
    others = [create_lane(harness.stack.name, name) for name in ("second", "third")]
    lanes(harness, max_concurrency, {"lanes": others})
    for prefix, url in [
        ("a", harness.stack.queue_url),
        *((lane["name"], lane["queue_url"]) for lane in others),
    ]:
        send(url, [f"{prefix}-{index}" for index in range(jobs)])
    return others


def test_every_start_throttled_with_three_lanes_tries_at_most_one_receive_batch_in_all(
    harness: Harness,
) -> None:
    """Invariant 6 across lanes: the account is throttled, so a tick sends ten starts in all, not ten each."""
    others = three_lanes(harness, 60, 20)
    counts = throttle_every_start(harness)
    result = harness.tick()
    assert (result["started"], result["released"], result["stopped"]) == (0, 60, "throttled")
    assert counts["most"] <= 10
    assert 1 <= counts["tried"] <= 10
    assert [
        harness.queue_counts(url) for url in (harness.stack.queue_url, *(o["queue_url"] for o in others))
    ] == [(20, 0)] * 3


def test_the_lanes_of_a_round_receive_at_once(harness: Harness) -> None:
    """Each lane's first receive of a round is in flight with the others' (each waits for all three)."""
    three_lanes(harness, 30, 3)
    together = threading.Barrier(3, timeout=20)
    queues: list[str] = []

    def meet(params: dict[str, Any], **_: Any) -> None:
        if params.get("WaitTimeSeconds") is not None and len(queues) < 3:
            queues.append(params["QueueUrl"])
            together.wait()

    harness.on("provide-client-params.sqs.ReceiveMessage", meet)
    result = harness.tick()
    assert result["started"] == 9
    assert len(set(queues)) == 3


def test_a_round_shares_its_hundred_starts_among_its_lanes(harness: Harness) -> None:
    """Three lanes that could take 60 slots each: no round starts more than 100, each lane a third of it."""
    three_lanes(harness, 180, 60)
    starts: list[int] = []
    per_round: dict[str, int] = {"starts": 0}

    def recorded(**_: Any) -> None:
        if per_round["starts"]:
            starts.append(per_round["starts"])
            per_round["starts"] = 0

    def started(**_: Any) -> None:
        per_round["starts"] += 1

    harness.on("provide-client-params.dynamodb.BatchWriteItem", recorded)
    harness.on("before-call.states.StartExecution", started)
    result = harness.tick()
    starts.append(per_round["starts"])
    assert result["started"] == 180
    assert {name: counts["started"] for name, counts in result["lanes"].items()} == {
        "default": 60,
        "second": 60,
        "third": 60,
    }
    assert max(starts) <= 100
    assert len(starts) >= 2


def test_a_configuration_error_in_one_lane_keeps_every_lanes_jobs(harness: Harness) -> None:
    """A state machine refuses the dispatcher: the tick raises, and no lane's job leaves its queue."""
    others = three_lanes(harness, 30, 3)
    harness.fail("states.StartExecution", "AccessDeniedException", "not authorized to start", after=2)
    with pytest.raises(ConfigurationError, match="not authorized"):
        harness.tick()
    urls = [harness.stack.queue_url, *(lane["queue_url"] for lane in others)]
    assert sum(sum(harness.queue_counts(url)) for url in urls) == 9
    assert sum(harness.queue_counts(url)[0] for url in urls) == 9, "released at once, not left in flight"


def test_a_lane_found_empty_does_not_hold_up_a_round_with_a_busy_one(harness: Harness) -> None:
    """Found empty last tick, beside a lane whose last receive was full: asked without waiting."""
    second = create_lane(harness.stack.name, "second")
    lanes(harness, 10, {"lanes": [second]})
    harness.monkeypatch.setenv("RECEIVE_WAIT_SECONDS", "1")
    send(harness.stack.queue_url, [f"a-{index}" for index in range(20)])
    waits: list[tuple[str, int]] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        waits.append((params["QueueUrl"], params["WaitTimeSeconds"]))

    harness.on("provide-client-params.sqs.ReceiveMessage", note)
    assert harness.tick()["started"] == 10
    assert {(harness.stack.queue_url, 1), (second["queue_url"], 1)} <= set(waits)
    waits.clear()
    assert harness.finish_running() == 10
    assert harness.tick(cold=False)["started"] == 10
    assert (harness.stack.queue_url, 1) in waits
    assert (second["queue_url"], 0) in waits
    assert (second["queue_url"], 1) not in waits
