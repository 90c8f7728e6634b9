"""The quiet end of a scenario: faults and events off, ticks until every queue is drained.

Liveness must not depend on best-effort events: once the fault phase is over, the
scenario waits out visibility timeouts and recorded starts, then ticks, checking each
quiet tick's count against the truth, until the queues are empty (`drain`). A gate's
scenario then checks that nobody is left inside (`settle_gate`). What is left on the
queues (`visible_messages`, `queue_counts`, `dead_letters`) is what the checks read.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dispatcher import handler
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS
from dispatcher.local.stack import read_all
from tests.faults.gate_plans import GATE
from tests.faults.jobs import MAX_DURATION_SECONDS
from tests.faults.lanes import LANE
from tests.faults.scenario import MAX_LAG_SECONDS
from tests.faults.tenants import LONG_SECONDS
from tests.support.faulty_aws import VISIBILITY_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from tests.faults.run import ScenarioRun


def drain(run: ScenarioRun) -> None:
    """Faults and events off: wait out visibility timeouts and recorded starts, then tick to the end."""
    run.world.faults.quiet()
    run.world.events.enabled = False
    run.world.deliveries.clear()
    # Someone else's redrive during the drain would start an execution the list can't
    # show yet, and the exact count below could not be checked.
    run.redrive_after.clear()
    run.redrives.clear()
    if run.lane_run is not None:
        run.lane_run.resume(run.ssm, run.stack.control_parameter, run.world)
        handler.reset_clients()  # the control parameter's cache (5 s) is long expired by the end
        run.lane_run.read_afresh(run.world)
    if run.gate_run is not None:
        run.gate_run.resume(run.ssm, run.stack.control_parameter)
        handler.reset_clients()
    if run.adaptive_run is not None:
        run.outcome.violations += run.adaptive_run.quiet()
    tenants = run.scenario.tenants
    longest = LONG_SECONDS if tenants is not None and tenants.long_jobs else MAX_DURATION_SECONDS
    # What ran in the fault phase has ended, and the list has stopped showing it.
    run.advance(max(VISIBILITY_TIMEOUT_SECONDS + RECENT_START_WINDOW_SECONDS, longest) + MAX_LAG_SECONDS + 1)
    left = visible_messages(run)
    # One tick per MAX messages, one to see the queue empty, one spare; and one more per
    # name collision, which waits a tick if DescribeExecution doesn't show the original yet.
    collisions = sum(job.poison == "name collision" for job in run.scenario.jobs)
    bound = math.ceil(left / run.scenario.max_concurrency) + 2 + collisions
    if run.lane_run is not None and run.lane_run.limited():
        # Each quiet tick starts at most the lane's own limit of its jobs: its MAX, its
        # pool's, one bucket of its rate (it refills in between).
        bound += math.ceil(sum(queue_counts(run, run.lane)) / run.lane_run.limit())
    if run.gate_run is not None:
        # Each quiet tick admits at most the gate's limit of its waiting executions.
        bound += math.ceil(run.gate_run.waiting() / run.gate_run.limit(run.scenario.max_concurrency)) + 1
    # A repeat sent to the other lane of the same machine: when both lanes receive its name
    # in one round, the second lane's copy and its group wait a round (`LaneStarts.to_record`),
    # and that lane's round may find nothing else to do ("waiting").
    crossing = 0 if run.scenario.lane is None else len(run.scenario.lane.crossing)
    if run.adaptive_run is not None:
        # After `reset-limit`, pool default's L is its `initial`: each tick may start that few.
        bound *= run.adaptive_run.quiet_slowdown()
    crossing += _sized_waits(run, left)
    bound += crossing
    waited = 0
    if tenants is not None and (tenants.default_limit or tenants.lane_limit or tenants.gate_limit):
        # A group at its limit starts (or enters) no more in a tick: at least one job a tick
        # still starts, or one request is admitted or dropped.
        bound += left
    settle = longest + MAX_LAG_SECONDS + 1
    for _ in range(bound):
        running = truly_running(run)
        waiting = 0 if run.gate_run is None else run.gate_run.waiting()
        report = run._tick(None)
        if report is None:
            return
        # An admission recorded by a tick that died before its call holds a place until its
        # request comes back: a waiting execution may be counted (never one that left).
        if not running <= report["running"] <= running + waiting:
            run.outcome.violations.append(
                f"leak: with faults off the tick counted {report['running']} RUNNING, truly {running}"
                + (f" and {waiting} waiting at the gate" if waiting else "")
            )
        waited += report["stopped"] == "waiting"
        if report["stopped"] not in {"capacity", "drained", "throttled", "waiting"} or waited > crossing:
            run.outcome.violations.append(f"liveness: a quiet tick stopped with {report['stopped']!r}")
        run.advance(settle)
        if report["stopped"] == "drained" and visible_messages(run) == 0:
            return
    run.outcome.violations.append(
        f"liveness: {left} message(s) not drained within {bound} quiet ticks"
        f" at MAX {run.scenario.max_concurrency}"
    )


def settle_gate(run: ScenarioRun) -> None:
    """Once every gated execution ended, a quiet tick counts no one inside and leaves no admission."""
    assert run.gate_run is not None
    run.advance(MAX_DURATION_SECONDS + MAX_LAG_SECONDS + 1)
    report = run._tick(None)
    inside = None if report is None else report["gates"][GATE]["inside"]
    if inside != 0 or run.gate_run.recorded():
        run.outcome.violations.append(
            f"leak: once every gated execution ended, the tick counted {inside} inside the gate,"
            f" and the state table still holds {run.gate_run.recorded()}"
        )


def _sized_waits(run: ScenarioRun, left: int) -> int:
    """Quiet ticks that may stop "waiting" for jobs' sizes: one a job left, with sizes drawn.

    A large job received after smaller ones of its tick waits for the next (the pool
    empties in between): that tick may stop "waiting", and start fewer.
    """
    return 0 if run.scenario.sizes is None else left


def truly_running(run: ScenarioRun) -> int:
    """What a quiet tick counts, in slots: the lanes' executions, who is inside the gate (not who waits)."""
    if run.gate_run is None:
        return sum(execution.slots for execution in run.world.running())
    lanes = [
        execution for execution in run.world.running() if not execution.arn.startswith(run.gate_run.prefix)
    ]
    return sum(execution.slots for execution in lanes) + run.gate_run.inside()


def queues(run: ScenarioRun) -> list[tuple[str, str]]:
    """(job queue, dead-letter queue) of each lane, default first."""
    found = [(run.stack.queue_url, run.stack.dead_letter_queue_url)]
    if run.lane is not None:
        found.append((run.lane["queue_url"], run.lane["dead_letter_queue_url"]))
    return found


def queue_counts(run: ScenarioRun, lane: dict[str, Any] | None = None) -> tuple[int, int]:
    """(visible, in flight) messages on the source queue (or on ``lane``'s)."""
    attributes = run.sqs.get_queue_attributes(
        QueueUrl=run.stack.queue_url if lane is None else lane["queue_url"],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def visible_messages(run: ScenarioRun) -> int:
    """Messages on the lanes' queues and the gate's (visible or in flight)."""
    gate = (
        0 if run.gate_run is None else sum(queue_counts(run, {"queue_url": run.gate_run.entry["queue_url"]}))
    )
    return sum(queue_counts(run)) + (0 if run.lane is None else sum(queue_counts(run, run.lane))) + gate


def dead_letters(run: ScenarioRun) -> dict[str, list[dict[str, Any]]]:
    """Every DLQ message (deleted once read), by its deduplication id (the source MessageId).

    Each message's ``Lane`` says whose DLQ held it (None: lane default's).
    """
    letters: dict[str, list[dict[str, Any]]] = {}
    for lane, (_, dead_letter_url) in zip([None, LANE], queues(run), strict=False):
        for message in read_all(dead_letter_url, run.sqs):
            message["Lane"] = lane
            letters.setdefault(message["Attributes"]["MessageDeduplicationId"], []).append(message)
    return letters
