"""Others' acts in a scenario: the operator's `dispatcher rerun`, someone else's executions, stray events.

The operator's acts are the CLI's own commands, run in-process (`tests.faults.operator`);
what they queued is noted on the run, for the checks at the end (`tests.faults.checks`).
Someone else starts executions of the same state machine, and an event that must change
nothing (another machine's, a RUNNING status) reaches a tick.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from dispatcher.core.executions import execution_arn
from dispatcher.core.rerun import REDRIVE, RESTART
from tests.faults.ending import drain
from tests.faults.operator import STALE_MEMBER, expire_holds, forget_stale_key, run_rerun
from tests.faults.scenario import ADVICE
from tests.support.runs import execution_event

if TYPE_CHECKING:
    from tests.faults.run import ScenarioRun
    from tests.support.crashes import CrashPlan


def rerun(run: ScenarioRun, crash: CrashPlan | None, mode: str | None = None) -> None:
    """The operator runs `dispatcher rerun`; killed, its held spool messages come back later.

    With ``rerun_switch``, the runs after the first killed one are in the other mode;
    failures an earlier run queued the other way are skipped, and the operator then
    does as the skip says (runs that mode once).
    """
    mode = mode or run.rerun_mode
    run.modes_used.add(mode)
    if mode != run.scenario.rerun_mode:
        run.outcome.rerun_switches += 1
    result, sent = run_rerun(mode, crash)
    run.outcome.reruns += 1
    if result.crashed and run.scenario.rerun_switch:
        run.rerun_mode = REDRIVE if run.scenario.rerun_mode == RESTART else RESTART
    refusals = [
        match.group(1)
        for skipped in result.skipped
        if (match := ADVICE.search(skipped.get("skipped", ""))) is not None
    ]
    run.outcome.rerun_refused += len(refusals)
    for entry in sent:
        attributes = {key: value["StringValue"] for key, value in entry.get("MessageAttributes", {}).items()}
        run.rerun_queues.setdefault(attributes["ExecutionName"], set()).add(entry["QueueUrl"])
        if "RedriveCount" in attributes:
            run.redrive_jobs.add((attributes["ExecutionName"], int(attributes["RedriveCount"])))
        else:
            run.restart_jobs.add(attributes["ExecutionName"])
    run.outcome.rerun_jobs += len(result.queued)
    if result.crashed:
        run.outcome.rerun_crashes += 1
        expire_holds(run.stack.spool_queue_url)
    elif result.exit_status != 0:
        # An AWS error that outlived the CLI's retries: the operator runs it again later.
        run.world.injected["`dispatcher rerun` failed on AWS errors"] += 1
    for other in sorted(set(refusals) - {mode}):
        if mode == run.rerun_mode:  # not from inside an advised run
            rerun(run, None, other)


def forget_stale_keys(run: ScenarioRun) -> None:
    """The operator removes each stale key `status` would list: `forget` takes it, once."""
    for kind in run.scenario.stale.values():
        status, printed = forget_stale_key(kind)
        forgotten = json.loads(printed).get("forgotten", {}) if status == 0 else {}
        if f"{kind}.{STALE_MEMBER}" not in forgotten:
            run.outcome.violations.append(f"forget --{kind} {STALE_MEMBER}: exit {status}, {printed!r}")


def spooled(run: ScenarioRun) -> int:
    """Failures on the scenario's spool queue, visible or held."""
    attributes = run.sqs.get_queue_attributes(
        QueueUrl=run.stack.spool_queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


RERUNS_AT_THE_END = 8
"""How often the operator runs `rerun` again at the end, as its skips ask ("run this again").

A skip for a read that lags, or for start records AWS still throttles after the CLI's 3
attempts (a Query throttled 70 % of the time fails a run one time in three), is left on
the spool for the next run: 8 runs leave about two in ten thousand such failures, where 3 left
one in twenty-five.
"""


def rerun_what_failed(run: ScenarioRun) -> None:
    """The outage is over: re-run whatever is spooled, and drain, until nothing failed is left."""
    run.world.outage_until = 0.0
    for _ in range(RERUNS_AT_THE_END):
        expire_holds(run.stack.spool_queue_url)
        if not spooled(run):
            return
        rerun(run, None)
        drain(run)
    if spooled(run):
        run.outcome.violations.append(f"loss: {spooled(run)} spooled failure(s) never re-run")


def start_external(run: ScenarioRun, tick: int) -> None:
    """Someone else starts an execution of the same state machine (and may redrive it later)."""
    seconds = run.scenario.external.get(tick)
    if seconds is not None:
        run.sfn.start_execution(
            stateMachineArn=run.stack.state_machine_arn,
            name=f"external-{tick}",
            input=json.dumps({"seconds": seconds}),
        )
        redrive_after = run.scenario.redrives.get(tick)
        if redrive_after is not None:
            arn = execution_arn(run.stack.state_machine_arn, f"external-{tick}")
            run.redrive_after[arn] = redrive_after


def misdirect(run: ScenarioRun, tick: int) -> None:
    """An event that must change nothing: for another state machine, or a RUNNING status."""
    kind = run.scenario.misdirected.get(tick)
    running = [execution for execution in run.world.running() if execution.by_dispatcher]
    if kind is None or not running:
        return
    execution = run.rng.choice(running)
    if kind == "other machine":
        event = execution_event(execution, "SUCCEEDED", run.stack.state_machine_arn + "-other")
        event["detail"]["stopDate"] = int(run.world.now * 1000)
    else:
        event = execution_event(execution, "RUNNING")
    run.world.injected[f"misdirected event ({kind})"] += 1
    run._tick(None, event=event)
