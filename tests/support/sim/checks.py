"""What the in-memory AWS's tests ask of a run: an invocation in process; every job started once, in order."""

from __future__ import annotations

import json

from tests.support.sim.aws import InMemoryAws


def in_process(aws: InMemoryAws, body: object) -> None:
    """Run ``body`` as a participant of the simulation, to its end."""
    aws.scheduler.spawn(body, "test")  # type: ignore[arg-type]
    aws.scheduler.run_until(aws.scheduler.now + 600)


def every_job_started_once_in_order(aws: InMemoryAws) -> None:
    """No loss, no duplicate, the body as input, each group in send order, and the queue drained."""
    started = aws.started()
    by_job = {json.loads(execution.input)["job"]: execution for execution in started}
    sent = {json.loads(message.body)["job"]: message for message in aws.queue.sent}
    assert len(started) == len(by_job) == len(sent)
    assert all(by_job[job].input == message.body for job, message in sent.items())
    groups: dict[str, list[int]] = {}  # each group's jobs in send order, read in one pass
    for message in aws.queue.sent:
        groups.setdefault(message.group, []).append(json.loads(message.body)["job"])
    for jobs in groups.values():
        assert [by_job[job].sequence for job in jobs] == sorted(by_job[job].sequence for job in jobs)
    assert aws.queue.depth() == (0, 0)
