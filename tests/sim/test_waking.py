"""Wakes in the in-memory AWS: what `make bench`'s arrival section runs, checked in virtual time.

A producer's `Waker` (the client's own, on the virtual clock) sends its wakes to the
function's end-event queue; the mapping batches them; the batch's tick starts the job, and
a job the producer queued within its wake's second, whose wake it spared, starts too.
"""

from __future__ import annotations

import json

import pytest

from tests.support.sim.aws import InMemoryAws
from tests.support.sim.deployment import function
from tests.support.sim.function import EventSourceMapping

pytestmark = pytest.mark.no_cover
"""Whole runs of the in-memory AWS (the same lines are measured in tests/unit and tests/integration)."""


def _waits(aws: InMemoryAws) -> dict[str, float]:
    sent = {message.message_id: message for message in aws.queue.sent}
    return {
        json.loads(execution.input)["job"]: execution.started_at - sent[execution.name].sent_at
        for execution in aws.started()
    }


def test_a_job_sent_to_a_quiet_dispatcher_starts_on_its_wake_and_a_spared_wakes_job_too(
    aws: InMemoryAws,
) -> None:
    """Hourly schedule: each wake's batch starts its job, and a job queued within the wake's second too.

    The mapping's window is 0.2 s here and a receive doesn't wait, so the wake's tick runs
    (and drains) before the spared job is queued: it starts only because that tick ticks
    again when the wake's second has passed.
    """
    dispatcher = function(aws, 5, mapping=EventSourceMapping(window_seconds=0.2))
    waker = dispatcher.waker()
    scheduler = aws.scheduler
    began = scheduler.now
    dispatcher.schedule(3600.0, until=began + 3600)
    sent: list[bool] = []

    def send(job: str) -> None:
        aws.queue.send(json.dumps({"job": job, "seconds": 5}), job)
        sent.append(waker.wake())

    scheduler.call_at(began + 100.0, lambda: send("first"))
    scheduler.call_at(began + 101.5, lambda: send("second"))  # the wake's second has passed: wakes again
    scheduler.call_at(began + 200.0, lambda: send("third"))
    scheduler.call_at(began + 200.6, lambda: send("spared"))  # within the third's second: no wake
    scheduler.run_until(began + 300)
    assert sent == [True, True, True, False]
    assert dispatcher.wakes_sent == 3
    waits = _waits(aws)
    assert set(waits) == {"first", "second", "third", "spared"}
    assert max(waits.values()) < 2.0, waits
    assert waits["spared"] > 0.3  # it waited for the wake's second to pass, not for the schedule
    woken = [run.report for run in dispatcher.invocations if run.trigger == "event" and run.report]
    # Each wake's tick drained within its second and ticked once more when it had passed: never more.
    assert [report["ticks"] for report in woken] == [2, 2, 2]
    assert aws.world.violations == []
    assert dispatcher.errors == []


def test_without_a_wake_a_job_sent_to_a_quiet_dispatcher_waits_for_the_schedule(aws: InMemoryAws) -> None:
    """The baseline beside it: the same job, no wake, starts at the next scheduled tick."""
    dispatcher = function(aws, 5, mapping=EventSourceMapping(), receive_wait_seconds=1)
    scheduler = aws.scheduler
    began = scheduler.now
    dispatcher.schedule(60.0, until=began + 300)
    scheduler.call_at(began + 100.0, lambda: aws.queue.send(json.dumps({"job": "first", "seconds": 5}), "g"))
    scheduler.run_until(began + 300)
    assert 19.0 <= _waits(aws)["first"] <= 21.0
    assert dispatcher.wakes_sent == 0
