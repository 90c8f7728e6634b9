"""The end of a scenario, checked against the emulator's ground truth: every invariant it can show.

Loss (a message left, a job with no execution, a failure never re-run), duplicates (an
execution no job asked for, a redrive no job asked for, a failure both redriven and
restarted), inputs, dead letters (each poison once, in its own lane's DLQ, with its
reason; nothing else), and order within each group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dispatcher.core.jobs import EXPIRED_PREFIX
from dispatcher.core.rerun import RESTART, restart_name
from tests.faults.ending import dead_letters, visible_messages
from tests.faults.following import follow_figures
from tests.faults.jobs import REASONS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tests.faults.jobs import Job
    from tests.faults.run import ScenarioRun
    from tests.support.runs import Execution


def check_end_state(run: ScenarioRun) -> None:
    """Every invariant the end state can show: loss, duplicates, inputs, re-runs, dead letters, order."""
    violations = run.outcome.violations
    jobs = run.scenario.jobs
    left = visible_messages(run)
    if left:
        violations.append(f"loss: {left} message(s) still on the source queue at the end")
    ours = {
        execution.name: execution for execution in run.world.executions.values() if execution.by_dispatcher
    }
    expected = {job.execution_name for job in jobs if job.poison is None}
    restarts = _restarts(run, ours)
    letters = dead_letters(run)
    expired = _expired(run, letters)
    # Ended otherwise: cancelled by its producer, or expired (`tests.faults.following` checks both).
    excused = {job.execution_name for job in jobs if job.message_id in expired}
    if run.following is not None:
        excused |= run.following.never_started()
        violations += run.following.check(ours, expired)
        run.outcome.follow.update(follow_figures(run.following, len(expired)))
    for name in sorted(expected - ours.keys() - excused):
        violations.append(f"loss: no execution for {name}")
    for name in sorted(ours.keys() - expected - restarts.keys()):
        violations.append(f"duplicate: unexpected execution {name}")
    _check_reruns(run, ours, restarts, _expired_reruns(run, letters))
    _check_rerun_lanes(run, restarts)
    for job in jobs:
        execution = ours.get(job.execution_name)
        group_cancelled = run.following is not None and run.following.in_cancelled_group(job)
        if job.message_id in expired or job.execution_name in excused or group_cancelled:
            continue  # it never started: a repeat, or a job sent under its name, may have
        if job.poison is None and execution is not None and execution.input != job.body:
            violations.append(f"input: {job.execution_name} started with another input")
    _check_dead_letters(run, letters)
    _check_order(run, ours, set(expired))


def _restarts(run: ScenarioRun, ours: dict[str, Execution]) -> dict[str, Execution]:
    """Restart name → the failed execution it re-runs (any execution of ours that ever failed)."""
    return {
        restart_name(execution.name, execution.arn): execution
        for execution in ours.values()
        if any(run.status == "FAILED" for run in execution.runs)
    }


def _check_reruns(
    run: ScenarioRun, ours: dict[str, Execution], restarts: dict[str, Execution], expired: set[str]
) -> None:
    """Every failure re-run once, in a mode the operator ran: restarted or redriven, never both.

    ``expired``: the names of re-run jobs that expired (a lane's bound on the wait): their
    failures end there.
    """
    violations = run.outcome.violations
    redriven = {name for name, _ in run.world.dispatcher_redrives}
    for name, count in run.world.dispatcher_redrives:
        if (name, count) not in run.redrive_jobs:
            violations.append(f"duplicate: {name} redriven at redriveCount {count}, which no job asked for")
    if RESTART not in run.modes_used and run.restart_jobs:
        violations.append(f"rerun: restart jobs, but no restart run: {sorted(run.restart_jobs)}")
    for execution in ours.values():
        final = execution.runs[-1]
        restart = ours.get(restart_name(execution.name, execution.arn))
        if final.status == "SUCCEEDED" and execution.name in redriven and restart is not None:
            violations.append(f"duplicate: {execution.name} redriven and restarted for one failure")
        if final.status != "FAILED":
            continue
        if {execution.name, restart_name(execution.name, execution.arn)} & expired:
            continue
        if run.following is not None and any(
            job.execution_name == execution.name
            and run.following.groups
            and job.lane is None
            and job.group in {cancelled.group for cancelled in run.following.groups}
            for job in run.scenario.jobs
        ):
            continue  # its group was cancelled: a re-run job queued in it may have been dropped
        if restart is None:
            violations.append(f"loss: {execution.name} failed and was never re-run")
        elif restart.input != execution.input:
            violations.append(f"input: the restart of {execution.name} has another input")
    if RESTART not in run.modes_used:
        for name in sorted(restarts.keys() & ours.keys()):
            violations.append(f"rerun: {name} restarted, but no restart run")


def _check_rerun_lanes(run: ScenarioRun, restarts: dict[str, Execution]) -> None:
    """Every re-run job went back to the queue of the lane its execution came from, never another."""
    queues = {
        None: run.stack.queue_url,
        **({} if run.lane is None else {run.lane["name"]: run.lane["queue_url"]}),
    }
    lanes: dict[str, set[str | None]] = {}
    for job in run.scenario.jobs:
        lanes.setdefault(job.execution_name, set()).add(job.lane)

    def origin(name: str) -> set[str]:
        """The queue(s) a job that may have started ``name`` was on: its own, or its re-run job's.

        Two when two lanes admitted the same name: the re-run goes back to one of them.
        """
        if name in lanes:
            return {queues[lane] for lane in lanes[name]}
        return run.rerun_queues.get(name, set())

    for name, sent_to in run.rerun_queues.items():
        failed = restarts[name].name if name in restarts else name
        expected = origin(failed)
        if sent_to != expected and (len(sent_to) != 1 or not sent_to <= expected):
            run.outcome.violations.append(
                f"rerun: {name} was queued on {sorted(sent_to)}, not on its lane's {sorted(expected)}"
            )


def _reason(letter: dict[str, Any]) -> str:
    return str(letter.get("MessageAttributes", {}).get("DispatchError", {}).get("StringValue", ""))


def _expired(run: ScenarioRun, letters: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Message id → the ``DispatchError`` of each scenario job dead-lettered as expired.

    Poison too: one whose poison shows only at its start (a name collision) may expire first.
    """
    found: dict[str, str] = {}
    for job in run.scenario.jobs:
        for letter in letters.get(job.message_id, []):
            if _reason(letter).startswith(EXPIRED_PREFIX):
                found[job.message_id] = _reason(letter)
    return found


def _expired_reruns(run: ScenarioRun, letters: dict[str, list[dict[str, Any]]]) -> set[str]:
    """Execution names of re-run jobs (`rerun`'s, not the scenario's) that expired in the queue."""
    sent = {job.message_id for job in run.scenario.jobs}
    return {
        letter.get("MessageAttributes", {}).get("ExecutionName", {}).get("StringValue", "")
        for message_id, found in letters.items()
        if message_id not in sent
        for letter in found
        if _reason(letter).startswith(EXPIRED_PREFIX)
    }


def _check_dead_letters(run: ScenarioRun, letters: dict[str, list[dict[str, Any]]]) -> None:
    letters = dict(letters)
    cancelled = set() if run.following is None else run.following.never_started()
    expired = _expired(run, letters)  # checked by `tests.faults.following`, poison or not
    cancelled |= {job.execution_name for job in run.scenario.jobs if job.message_id in expired}
    for message_id in [*expired, *_rerun_letters(run, letters, _expired_reruns(run, letters))]:
        letters.pop(message_id, None)
    for job in run.scenario.jobs:
        found = letters.pop(job.message_id, [])
        if job.poison is None and found and _taken_name(run, job, found[0]):
            continue
        if job.poison is None:
            if found:
                violations = run.outcome.violations
                reason = found[0].get("MessageAttributes", {}).get("DispatchError", {}).get("StringValue")
                violations.append(f"dead-lettered a valid job {job.key}: {reason}")
            continue
        if job.message_id in expired or (
            not found and job.poison == "name collision" and _in_place(run, job, cancelled)
        ):
            continue
        if not found and run.following is not None and run.following.in_cancelled_group(job):
            continue  # its group was cancelled: dropped, not dead-lettered
        if len(found) != 1:
            run.outcome.violations.append(f"poison {job.key} ({job.poison}) is {len(found)} times in the DLQ")
            continue
        [letter] = found
        if letter["Lane"] != job.lane:
            wrong = letter["Lane"] or "default"
            run.outcome.violations.append(
                f"poison {job.key} of lane {job.lane or 'default'} in {wrong}'s DLQ"
            )
        reason = letter.get("MessageAttributes", {}).get("DispatchError", {}).get("StringValue", "")
        if REASONS[job.poison] not in reason or letter["Body"] != job.body:
            run.outcome.violations.append(f"poison {job.key} ({job.poison}) dead-lettered as {reason!r}")
    for dedup_id in letters:
        run.outcome.violations.append(f"DLQ holds a message that was never sent as poison: {dedup_id}")


def _taken_name(run: ScenarioRun, job: Job, letter: dict[str, Any]) -> bool:
    """Whether a valid job met its name taken by another job's input (its original never started).

    Then it is a name collision, rightly dead-lettered so.
    """
    return "name collision" in _reason(letter) and any(
        each.by_dispatcher and each.name == job.execution_name and each.input != job.body
        for each in run.world.executions.values()
    )


def _in_place(run: ScenarioRun, job: Job, cancelled: set[str]) -> bool:
    """Whether a name collision is none: its name was cancelled, or it started in the original's place.

    The job its name's first message carried never started (it expired, or was cancelled).
    """
    if job.execution_name in cancelled:
        return True
    execution = next(
        (
            each
            for each in run.world.executions.values()
            if each.by_dispatcher and each.name == job.execution_name
        ),
        None,
    )
    return execution is not None and execution.input == job.body


def _rerun_letters(run: ScenarioRun, letters: dict[str, list[dict[str, Any]]], names: set[str]) -> list[str]:
    """The dead letters of expired re-run jobs (a lane's ``MAX_WAIT_SECONDS`` bounds them too)."""
    if run.scenario.follow is None or run.scenario.follow.max_wait_seconds is None:
        return []  # without a bound, a re-run job never expires: its dead letter is a violation
    return [
        message_id
        for message_id, found in letters.items()
        if any(
            letter.get("MessageAttributes", {}).get("ExecutionName", {}).get("StringValue") in names
            for letter in found
        )
    ]


def _check_order(run: ScenarioRun, ours: dict[str, Execution], expired: set[str]) -> None:
    """Within each group, executions started in send order.

    A name two lanes admit (a repeat sent to the other lane) may be started by either: its
    execution tells nothing of its own group's order, so it is left out; so is a job that
    expired (``expired``: message ids) while a repeat of it started its name.
    """
    by_group: dict[str, list[int]] = {}
    crossing = crossing_names(run.scenario.jobs)
    for job in sorted(run.scenario.jobs, key=lambda job: job.arrives):  # stable: send order
        execution = ours.get(job.execution_name)
        if (
            job.poison is None
            and job.duplicate_of is None
            and execution is not None
            and job.execution_name not in crossing
            and job.message_id not in expired
        ):
            by_group.setdefault(job.group, []).append(execution.sequence)
    for group, sequence in by_group.items():
        if sequence != sorted(sequence):
            run.outcome.violations.append(f"order: group {group} started out of send order {sequence}")


def crossing_names(jobs: Sequence[Job]) -> set[str]:
    """Execution names that valid jobs of two lanes carry: whichever lane comes first starts it."""
    lanes: dict[str, set[str | None]] = {}
    for job in jobs:
        if job.poison is None:
            lanes.setdefault(job.execution_name, set()).add(job.lane)
    return {name for name, found in lanes.items() if len(found) > 1}
