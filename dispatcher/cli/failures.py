"""`dispatcher failed` and `dispatcher rerun`: the failure spool, and re-runs through the cap.

Each reads the spool by receiving (SQS has no other way to look), holds what it read
while it works, and gives back every message it did not finish with, even on Ctrl-C or
an error. ``--dry-run`` shows the plan and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from dispatcher.adapters.claims import RerunClaims
from dispatcher.adapters.queue_reading import QueueReading
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.cli.args import AddCommand, count, moment, rate, statuses
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.members import lanes_needs, member
from dispatcher.cli.origins import Origins, cancelled, configured_lanes, destination_of, read_origins
from dispatcher.cli.output import short, table, when
from dispatcher.cli.progress import Pace, Progress, of
from dispatcher.core.executions import REDRIVABLE_STATUSES, state_machine_of
from dispatcher.core.messages import Job, group_problem
from dispatcher.core.rerun import (
    REDRIVE,
    RESTART,
    Destination,
    Filters,
    Rerun,
    Spooled,
    by_execution,
    choose_group,
    counts,
    plan_rerun,
)
from dispatcher.core.topology import DEFAULT
from dispatcher.producer import Producer
from dispatcher.waking import Waker


def _filters(args: argparse.Namespace) -> Filters:
    return Filters(
        statuses=args.status or REDRIVABLE_STATUSES,
        error=args.error,
        name=args.name,
        since=args.since,
        until=args.until,
    )


def _read_spool(spool: QueueReading, quiet: bool) -> tuple[list[Spooled], int]:
    progress = Progress(quiet=quiet or not sys.stderr.isatty())
    messages = spool.read_all(lambda done: progress.show(of("read", done, None), done))
    if messages:
        progress.show(of("read", len(messages), None), len(messages), final=True)
    spooled, unreadable = by_execution(messages)
    return spooled, len(unreadable)


def _selected(
    args: argparse.Namespace, aws: Aws, resources: Resources, spooled: list[Spooled], *, groups: bool
) -> tuple[list[tuple[Spooled, Destination]], Origins]:
    """The failures the filters (and ``--lane``) keep, each with where its re-run goes; their origins.

    ``groups``: their recorded message groups are wanted too (a restart without ``--group``).
    """
    filters = _filters(args)
    kept = [item for item in spooled if filters.keep(item.failure)]
    lanes = configured_lanes(resources)
    origins = read_origins(aws, resources, kept, lanes, groups=groups)
    found = []
    for item in kept:
        where = destination_of(item, origins, lanes, args.lane)
        if where is not None:
            found.append((item, where))
    return found, origins


def _check_lane(args: argparse.Namespace, resources: Resources) -> None:
    """``--lane`` names a configured lane (a usage error otherwise, before the spool is read)."""
    if args.lane is not None:
        member(resources, "lane", args.lane)


def _failures_table(selected: Sequence[tuple[Spooled, Destination]], *, laned: bool) -> str:
    """One row a failure; a LANE column when there are several lanes (or one can't be known)."""
    rows = [
        [
            item.failure.name,
            *([where.lane or "?"] if laned else []),
            item.failure.status,
            item.failure.error or "-",
            when(item.failure.stopped_at),
            short(item.failure.cause, 40),
        ]
        for item, where in selected
    ]
    headers = ["NAME", *(["LANE"] if laned else []), "STATUS", "ERROR", "STOPPED (UTC)", "CAUSE"]
    return table(headers, rows)


def _write_failures(
    out: TextIO, resources: Resources, selected: Sequence[tuple[Spooled, Destination]]
) -> None:
    """The failures as a table, then their tally by status and error."""
    failures = [item.failure for item, _ in selected]
    unknown = sum(1 for _, where in selected if where.lane is None)
    out.write(_failures_table(selected, laned=configured_lanes(resources).several or unknown > 0) + "\n\n")
    tally = counts(failures)
    out.write(
        f"{len(failures)} failed execution(s): "
        + ", ".join(f"{status} {count}" for status, count in tally["status"].items())
        + "; by error: "
        + ", ".join(f"{error} {count}" for error, count in tally["error"].items())
        + "\n"
    )
    if unknown:
        out.write(
            f"{unknown} of them came from a lane that can't be known (LANE ?):"
            " `rerun --lane NAME` re-runs them on lane NAME\n"
        )


def command_failed(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """List the spooled failures (each execution once, at its latest failure), with counts."""
    _check_lane(args, resources)
    spool = QueueReading(aws.client("sqs"), resources.need("spool_queue_url"), visibility_seconds=60)
    try:
        spooled, unreadable = _read_spool(spool, args.json)
    finally:
        spool.show_all_again()
    selected, _ = _selected(args, aws, resources, spooled, groups=False)
    failures = [item.failure for item, _ in selected]
    if args.json:
        document = {
            "failures": [{**item.failure.as_json(), "lane": where.lane} for item, where in selected],
            "total": len(failures),
            "counts": counts(failures),
            "unreadable": unreadable,
        }
        out.write(json.dumps(document) + "\n")
        return 0
    if not failures:
        out.write("no spooled failures" + (" match" if spooled else "") + "\n")
    else:
        _write_failures(out, resources, selected)
    if unreadable:
        sys.stderr.write(f"{unreadable} spool message(s) are not status change events; left as they are\n")
    return 0


def _plan(
    args: argparse.Namespace, aws: Aws, resources: Resources, spool: QueueReading
) -> tuple[list[tuple[Rerun, str | None]], int]:
    """Each selected failure's re-run, with the lane it goes to (None: it can't be known)."""
    spooled, unreadable = _read_spool(spool, args.json)
    selected, origins = _selected(args, aws, resources, spooled, groups=args.group is None)
    if args.max is not None:
        selected = selected[: args.max]
    client = aws.client("stepfunctions")
    mode = REDRIVE if args.redrive else RESTART
    now = time.time()
    plans: list[tuple[Rerun, str | None]] = []
    for item, where in selected:
        spool.keep_hidden()
        arn = item.failure.execution_arn
        # Unread records: its group and lane unknown, and a guess could pass its group's limit.
        skip = origins.why_unread(arn) or where.unknown
        if skip is None and where.lane is not None:
            skip = cancelled(aws, resources, where.lane, item.failure.name)
        if skip is not None:
            plans.append((Rerun(item, mode, skip=skip), where.lane))
            continue
        origin = origins.found.get(arn)
        group = choose_group(arn, None if origin is None else origin.group, args.group)
        machine = StateMachine(client, state_machine_of(item.failure.execution_arn))
        slots = 1 if origin is None else origin.slots
        state = machine.state_of(item.failure.name)
        plans.append((plan_rerun(item, mode, state, group, now, slots), where.lane))
    return plans, unreadable


def prepare_rerun(args: argparse.Namespace) -> list[str]:
    """--group must be a FIFO message group id."""
    problem = None if args.group is None else group_problem(args.group)
    return [] if problem is None else [f"--group: {problem}"]


def command_rerun(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Queue a restart or a redrive job for each spooled failure; delete each spool message once queued."""
    _check_lane(args, resources)
    outcome = _Outcome()
    progress = Progress(quiet=args.json)

    def said() -> str:
        return (
            f"{len(outcome.queued):,} re-run job(s) queued; the failures not queued are back on the spool:"
            " run the same command again to finish (no failure is re-run twice)"
        )

    with progress.on_ctrl_c(said):
        _rerun_each(args, aws, resources, progress, outcome)
    _report_reruns(args, out, outcome)
    return 1 if outcome.failed else 0


def _rerun_each(
    args: argparse.Namespace, aws: Aws, resources: Resources, progress: Progress, outcome: _Outcome
) -> None:
    """Plan every spooled failure, then queue (or skip) each; the spool's holds are given back at the end."""
    spool = QueueReading(aws.client("sqs"), resources.need("spool_queue_url"))
    queues = configured_lanes(resources).queues
    # A re-run goes back to its own lane; every lane's producer wakes in one second's turn.
    waker = Waker(aws.client("sqs"), resources.wake_queue_url)
    producers = {lane: Producer(url, client=aws.client("sqs"), waker=waker) for lane, url in queues.items()}

    pace = Pace(args.rate)
    queued, skipped = outcome.queued, outcome.skipped
    try:
        plans, outcome.unreadable = _plan(args, aws, resources, spool)
        verb = "queued" if not args.dry_run else "planned"
        for done, (rerun, lane) in enumerate(plans, start=1):
            spool.keep_hidden()
            rerun.lane = lane
            if rerun.job is not None:
                _check_claim(aws, resources, rerun, dry_run=args.dry_run)
            if rerun.job is None:
                skipped.append(rerun)
                if rerun.resolved and not args.dry_run:
                    spool.delete(rerun.spooled.messages)
            elif args.dry_run:
                queued.append(rerun)
            else:
                pace.wait()
                _queue(rerun, rerun.job, producers[str(lane)], spool, outcome)
            if len(plans) > 1:
                progress.show(of(verb, done, len(plans)), done, final=done == len(plans))
    finally:
        spool.show_all_again()


def _queue(rerun: Rerun, job: Job, producer: Producer, spool: QueueReading, outcome: _Outcome) -> None:
    """Queue one re-run job; once it is queued, delete its spool messages."""
    result = producer.send_batch([job])
    if result.failed:
        outcome.failed.append((rerun, result.failed[0].reason))
        return
    outcome.queued.append(rerun)
    if spool.delete(rerun.spooled.messages):
        sys.stderr.write(
            f"queued {rerun.spooled.failure.name}, but its spool message stays:"
            " a later rerun queues the same job again, which starts nothing twice\n"
        )


def _check_claim(aws: Aws, resources: Resources, rerun: Rerun, *, dry_run: bool) -> None:
    """Claim the failure for this run's mode (dry run: only look); skip it if the other mode has it."""
    if not resources.state_table:  # said once already: no table, no groups and no claims
        return
    claims = RerunClaims(
        aws.client("dynamodb"), resources.state_table, state_machine_of(rerun.spooled.failure.execution_arn)
    )
    name = rerun.spooled.failure.name
    if dry_run:
        other = claims.claimed(name, rerun.redrive_count)
        other = None if other == rerun.mode else other
    else:
        other = claims.claim(name, rerun.redrive_count, rerun.mode, time.time())
    if other is not None:
        rerun.job = None
        rerun.skip = (
            f"an earlier run queued it for --{other} (its job may still be waiting):"
            f" finish with `dispatcher rerun --{other}`"
        )


def _describe(rerun: Rerun) -> str:
    job = rerun.job
    if job is None:
        return ""
    where = f"in group {job.group} ({rerun.group_source})"
    if rerun.lane not in (None, DEFAULT):
        where += f" on lane {rerun.lane}"
    if job.redrive_count is not None:
        return f"redrive {job.name} (redriveCount {job.redrive_count}) {where}"
    return f"restart {rerun.spooled.failure.name} as {job.name} {where}"


@dataclass
class _Outcome:
    queued: list[Rerun] = field(default_factory=list)
    skipped: list[Rerun] = field(default_factory=list)
    failed: list[tuple[Rerun, str]] = field(default_factory=list)
    unreadable: int = 0


def _report_reruns(args: argparse.Namespace, out: TextIO, outcome: _Outcome) -> None:
    queued, skipped, failed = outcome.queued, outcome.skipped, outcome.failed
    if args.json:
        document = {
            "mode": REDRIVE if args.redrive else RESTART,
            "dry_run": bool(args.dry_run),
            "queued": [rerun.as_json() for rerun in queued],
            "skipped": [rerun.as_json() for rerun in skipped],
            "failed": [{**rerun.as_json(), "reason": reason} for rerun, reason in failed],
            "unreadable": outcome.unreadable,
        }
        out.write(json.dumps(document) + "\n")
        return
    _write_reruns(args, out, outcome)


def _write_reruns(args: argparse.Namespace, out: TextIO, outcome: _Outcome) -> None:
    """Each re-run queued, skipped or not queued on a line, then a summary."""
    queued, skipped, failed = outcome.queued, outcome.skipped, outcome.failed
    verb = "would queue" if args.dry_run else "queued"
    for rerun in queued:
        out.write(f"{verb} {_describe(rerun)}\n")
    for rerun in skipped:
        out.write(f"skipped {rerun.spooled.failure.name}: {rerun.skip}\n")
    for rerun, reason in failed:
        sys.stderr.write(f"not queued {rerun.spooled.failure.name}: {reason}\n")
    summary = (
        f"{verb} {len(queued)} {'redrive' if args.redrive else 'restart'} job(s), skipped {len(skipped)}"
    )
    if failed:
        summary += f", failed {len(failed)}"
    if args.dry_run:
        summary += " (dry run: nothing changed)"
    elif queued:
        summary += "; the dispatcher runs them within MAX"
    out.write(summary + "\n")


def _add_filters(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--lane",
        metavar="NAME",
        help="only this lane's failures, and those of its state machine whose lane can't be known",
    )
    sub.add_argument(
        "--status", type=statuses, metavar="S[,S]", help="FAILED, TIMED_OUT and/or ABORTED (all by default)"
    )
    sub.add_argument("--error", metavar="GLOB", help="the error name, a glob: 'States.Timeout', 'Api*'")
    sub.add_argument("--name", metavar="GLOB", help="the execution name, a glob")
    sub.add_argument("--since", type=moment, metavar="WHEN", help="stopped at or after: 3h, 2d, or ISO 8601")
    sub.add_argument("--until", type=moment, metavar="WHEN", help="stopped at or before: 30m, or ISO 8601")


def register(command: AddCommand) -> None:
    """Add `failed` and `rerun`."""
    failed = command(
        "failed",
        command_failed,
        "List the failed executions in the failure spool: name, status, error, when; with counts.",
        "  dispatcher --stack jobs failed\n"
        "  dispatcher --stack jobs failed --status FAILED,TIMED_OUT --since 3h\n"
        "  dispatcher --stack jobs failed --error 'Downstream*' --json\n",
        needs=lambda args, _resources: ["spool_queue_url", *lanes_needs(args)],
    )
    _add_filters(failed)
    failed.add_argument("--dry-run", action="store_true", help="accepted: listing never changes anything")

    rerun = command(
        "rerun",
        command_rerun,
        "Re-run spooled failures through the dispatcher and its cap: --redrive continues each execution"
        " from its failed state; --restart starts it anew under a derived name.",
        "  dispatcher --stack jobs rerun --redrive --dry-run\n"
        "  dispatcher --stack jobs rerun --redrive --error 'Downstream*' --since 3h\n"
        "  dispatcher --stack jobs rerun --restart --max 50 --rate 5\n",
        needs=lambda args, resources: [
            "spool_queue_url",
            "queue_url",
            *(["dead_letter_queue_url", "state_machine_arn"] if resources.lanes or args.lane else []),
        ],
        prepare=prepare_rerun,
    )
    mode = rerun.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--redrive", action="store_true", help="RedriveExecution: the same execution, from its failed state"
    )
    mode.add_argument(
        "--restart", action="store_true", help="a new execution with the same input, in the job's group"
    )
    _add_filters(rerun)
    rerun.add_argument("--max", type=count, metavar="N", help="re-run at most N executions (oldest first)")
    rerun.add_argument(
        "--rate", type=rate, metavar="PER_SECOND", help="queue at most this many jobs a second"
    )
    rerun.add_argument(
        "--group", metavar="GROUP", help="queue every re-run in this group (else the job's recorded group)"
    )
    rerun.add_argument("--dry-run", action="store_true", help="show what would be queued; change nothing")
