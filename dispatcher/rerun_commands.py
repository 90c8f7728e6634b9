"""The re-run commands of `dispatcher`: failed, rerun, dead-letters, redrive-dead-letters.

Each reads a queue by receiving (SQS has no other way to look), holds what it read
while it works, and gives back every message it did not finish with, even on Ctrl-C
or an error. ``--dry-run`` shows the plan and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.aws_errors import translate
from dispatcher.adapters.dynamodb import RerunClaims, StateTable
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.cli import PROGRESS_EVERY, Aws, Resources, UsageError, positive
from dispatcher.errors import DispatcherError
from dispatcher.planning import REDRIVABLE_STATUSES
from dispatcher.producer import Job, Producer
from dispatcher.rerun import (
    REDRIVE,
    RESTART,
    DeadLetterMove,
    Filters,
    HeldQueue,
    Pace,
    Rerun,
    Spooled,
    by_execution,
    choose_group,
    counts,
    plan_move,
    plan_rerun,
    reasons,
    state_machine_of,
)

DEAD_LETTER_VISIBILITY_SECONDS = 120
RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _moment(text: str) -> float:
    """``3h``, ``90m``, ``2d`` ago, or an ISO 8601 time (UTC unless it says otherwise)."""
    relative = RELATIVE.match(text.strip())
    if relative:
        return time.time() - float(relative.group(1)) * UNITS[relative.group(2)]
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (use 3h, 90m, 2d, or 2026-11-22T04:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.now().astimezone().tzinfo)
    return moment.timestamp()


def _rate(text: str) -> float:
    return positive(text, "a rate", "the rate must be > 0 per second")


def _count(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, not {text!r}")
    return int(text)


def _statuses(text: str) -> frozenset[str]:
    statuses = frozenset(part.strip().upper() for part in text.split(",") if part.strip())
    unknown = statuses - REDRIVABLE_STATUSES
    if not statuses or unknown:
        raise argparse.ArgumentTypeError(
            f"status must be among {', '.join(sorted(REDRIVABLE_STATUSES))}, not {text!r}"
        )
    return statuses


def _filters(args: argparse.Namespace) -> Filters:
    return Filters(
        statuses=args.status or REDRIVABLE_STATUSES,
        error=args.error,
        name=args.name,
        since=args.since,
        until=args.until,
    )


class _Progress:
    """A progress line on stderr: rewritten on a terminal, every so often otherwise."""

    def __init__(self, verb: str, total: int | None, *, quiet: bool) -> None:
        self._verb = verb
        self._total = total
        self._quiet = quiet
        self._step = 0

    def show(self, done: int, final: bool = False) -> None:
        if self._quiet:
            return
        of = f"/{self._total:,}" if self._total is not None else ""
        line = f"{self._verb} {done:,}{of}"
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{line}" + ("\n" if final else ""))
        elif done // PROGRESS_EVERY > self._step:
            sys.stderr.write(line + "\n")
        self._step = done // PROGRESS_EVERY
        sys.stderr.flush()


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
        for cells in (headers, *rows)
    )


def _short(text: str | None, width: int = 60) -> str:
    text = " ".join((text or "-").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(moment: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(moment))


# -- failed -----------------------------------------------------------------------------


def _read_spool(spool: HeldQueue, quiet: bool) -> tuple[list[Spooled], int]:
    progress = _Progress("read", None, quiet=quiet or not sys.stderr.isatty())
    messages = spool.read_all(progress.show)
    if messages:
        progress.show(len(messages), final=True)
    spooled, unreadable = by_execution(messages)
    return spooled, len(unreadable)


def command_failed(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """List the spooled failures (each execution once, at its latest failure), with counts."""
    spool = HeldQueue(aws.client("sqs"), resources.need("spool_queue_url"), visibility_seconds=60)
    try:
        spooled, unreadable = _read_spool(spool, args.json)
    finally:
        spool.release_all()
    filters = _filters(args)
    failures = [item.failure for item in spooled if filters.keep(item.failure)]
    if args.json:
        document = {
            "failures": [failure.as_json() for failure in failures],
            "total": len(failures),
            "counts": counts(failures),
            "unreadable": unreadable,
        }
        out.write(json.dumps(document) + "\n")
        return 0
    if not failures:
        out.write("no spooled failures" + (" match" if spooled else "") + "\n")
    else:
        rows = [
            [
                failure.name,
                failure.status,
                failure.error or "-",
                _when(failure.stopped_at),
                _short(failure.cause, 40),
            ]
            for failure in failures
        ]
        out.write(_table(["NAME", "STATUS", "ERROR", "STOPPED (UTC)", "CAUSE"], rows) + "\n\n")
        tally = counts(failures)
        out.write(
            f"{len(failures)} failed execution(s): "
            + ", ".join(f"{status} {count}" for status, count in tally["status"].items())
            + "; by error: "
            + ", ".join(f"{error} {count}" for error, count in tally["error"].items())
            + "\n"
        )
    if unreadable:
        sys.stderr.write(f"{unreadable} spool message(s) are not status change events; left as they are\n")
    return 0


# -- rerun ------------------------------------------------------------------------------


def _groups(aws: Aws, resources: Resources, selected: list[Spooled], option: str | None) -> dict[str, str]:
    """The recorded message group of each execution, when the state table still has it."""
    if option is not None or not selected:
        return {}
    if not resources.state_table:
        sys.stderr.write(
            "no state table configured: each re-run gets a group of its own (or pass --group),"
            " and nothing records which way a failure was re-run\n"
        )
        return {}
    found: dict[str, str] = {}
    for machine, items in _by_state_machine(selected).items():
        table = StateTable(aws.client("dynamodb"), resources.state_table, machine)
        try:
            found |= table.groups({item.failure.name: item.failure.started_at for item in items})
        except DispatcherError as error:
            sys.stderr.write(
                f"could not read the recorded groups ({error}); each re-run gets a group of its own\n"
            )
    return found


def _by_state_machine(selected: list[Spooled]) -> dict[str, list[Spooled]]:
    """Failures by the state machine their execution ARN names."""
    machines: dict[str, list[Spooled]] = {}
    for item in selected:
        machines.setdefault(state_machine_of(item.failure.execution_arn), []).append(item)
    return machines


def _plan(
    args: argparse.Namespace, aws: Aws, resources: Resources, spool: HeldQueue
) -> tuple[list[Rerun], int]:
    spooled, unreadable = _read_spool(spool, args.json)
    filters = _filters(args)
    selected = [item for item in spooled if filters.keep(item.failure)]
    if args.max is not None:
        selected = selected[: args.max]
    groups = _groups(aws, resources, selected, args.group)
    client = aws.client("stepfunctions")
    mode = REDRIVE if args.redrive else RESTART
    now = time.time()
    plans = []
    for item in selected:
        spool.keep_hidden()
        group = choose_group(item.failure.execution_arn, groups.get(item.failure.name), args.group)
        machine = StateMachine(client, state_machine_of(item.failure.execution_arn))
        plans.append(plan_rerun(item, mode, machine.state_of(item.failure.name), group, now))
    return plans, unreadable


def command_rerun(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Queue a restart or a redrive job for each spooled failure; delete each spool message once queued."""
    if args.group is not None:
        from dispatcher.planning import group_problem  # noqa: PLC0415

        problem = group_problem(args.group)
        if problem is not None:
            raise UsageError(f"--group: {problem}")
    spool = HeldQueue(aws.client("sqs"), resources.need("spool_queue_url"))
    producer = Producer(resources.need("queue_url"), client=aws.client("sqs"))
    pace = Pace(args.rate)
    outcome = _Outcome()
    queued, skipped = outcome.queued, outcome.skipped
    try:
        plans, outcome.unreadable = _plan(args, aws, resources, spool)
        progress = _Progress("queued" if not args.dry_run else "planned", len(plans), quiet=args.json)
        for done, rerun in enumerate(plans, start=1):
            spool.keep_hidden()
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
                _queue(rerun, rerun.job, producer, spool, outcome)
            if len(plans) > 1:
                progress.show(done, final=done == len(plans))
    finally:
        spool.release_all()
    _report_reruns(args, out, outcome)
    return 1 if outcome.failed else 0


def _queue(rerun: Rerun, job: Job, producer: Producer, spool: HeldQueue, outcome: _Outcome) -> None:
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


# -- dead letters -----------------------------------------------------------------------


def command_dead_letters(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """List the dead-letter queue with each message's DispatchError."""
    queue = HeldQueue(aws.client("sqs"), resources.need("dead_letter_queue_url"), visibility_seconds=30)
    try:
        moves = [plan_move(held) for held in queue.read_all()]
        depth = queue.depth()
    finally:
        queue.release_all()
    hidden = max(0, depth - len(moves))
    if args.json:
        document = {
            "dead_letters": [move.as_json() for move in moves],
            "total": len(moves),
            "reasons": reasons(moves),
            "not_listed": hidden,
        }
        out.write(json.dumps(document) + "\n")
        return 0
    if not moves:
        out.write("no dead letters\n")
    else:
        rows = [
            [
                move.held.message_id,
                move.group,
                move.attributes.get("ExecutionName", {}).get("StringValue", "-"),
                _short(move.reason or "(moved by SQS: maxReceiveCount)", 70),
            ]
            for move in moves
        ]
        out.write(_table(["MESSAGE ID", "GROUP", "NAME", "DISPATCH ERROR"], rows) + "\n\n")
        out.write(f"{len(moves)} dead letter(s)\n")
    if hidden:
        out.write(
            f"{hidden} more not listed: a FIFO queue hides a group's later messages while earlier"
            " ones are being read, or another reader holds them\n"
        )
    return 0


def _send_move(aws: Aws, queue_url: str, move: DeadLetterMove) -> None:
    request: dict[str, Any] = {
        "QueueUrl": queue_url,
        "MessageBody": move.held.body,
        "MessageGroupId": move.group,
        "MessageDeduplicationId": move.deduplication_id,
    }
    if move.attributes:
        request["MessageAttributes"] = move.attributes
    try:
        aws.client("sqs").send_message(**request)
    except (ClientError, BotoCoreError) as error:
        raise translate(error, f"SendMessage to {queue_url}") from error


def command_redrive_dead_letters(
    args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO
) -> int:
    """Move dead letters back to the job queue, in group order; each leaves the DLQ once sent."""
    queue_url = resources.need("queue_url")
    queue = HeldQueue(
        aws.client("sqs"),
        resources.need("dead_letter_queue_url"),
        visibility_seconds=DEAD_LETTER_VISIBILITY_SECONDS,
    )
    pace = Pace(args.rate)
    moved: list[DeadLetterMove] = []
    progress = _Progress("moved" if not args.dry_run else "listed", None, quiet=args.json)
    try:
        while args.max is None or len(moved) < args.max:
            queue.keep_hidden()
            batch = queue.receive()
            if not batch:
                break
            for held in batch:
                if args.max is not None and len(moved) >= args.max:
                    break
                move = plan_move(held)
                if not args.dry_run:
                    pace.wait()
                    _send_move(aws, queue_url, move)
                    if queue.delete([held]):
                        sys.stderr.write(
                            f"moved {held.message_id}, but it stays on the DLQ: moving it again sends"
                            " nothing new within 5 minutes, and never starts it twice\n"
                        )
                moved.append(move)
                progress.show(len(moved))
    finally:
        queue.release_all()
    if moved:
        progress.show(len(moved), final=True)
    _report_moves(args, out, moved)
    return 0


def _report_moves(args: argparse.Namespace, out: TextIO, moved: list[DeadLetterMove]) -> None:
    if args.json:
        document = {
            "dry_run": bool(args.dry_run),
            "moved": [{**move.as_json(), "deduplication_id": move.deduplication_id} for move in moved],
            "total": len(moved),
        }
        out.write(json.dumps(document) + "\n")
        return
    verb = "would move" if args.dry_run else "moved"
    for move in moved:
        name = move.attributes.get("ExecutionName", {}).get("StringValue", "-")
        was = _short(move.reason, 60)
        out.write(f"{verb} {move.held.message_id} (group {move.group}, name {name}): was {was}\n")
    summary = f"{verb} {len(moved)} dead letter(s) to the job queue"
    out.write(summary + (" (dry run: nothing changed)" if args.dry_run else "") + "\n")


# -- arguments --------------------------------------------------------------------------


def _add_filters(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--status", type=_statuses, metavar="S[,S]", help="FAILED, TIMED_OUT and/or ABORTED (all by default)"
    )
    sub.add_argument("--error", metavar="GLOB", help="the error name, a glob: 'States.Timeout', 'Api*'")
    sub.add_argument("--name", metavar="GLOB", help="the execution name, a glob")
    sub.add_argument("--since", type=_moment, metavar="WHEN", help="stopped at or after: 3h, 2d, or ISO 8601")
    sub.add_argument("--until", type=_moment, metavar="WHEN", help="stopped at or before: 30m, or ISO 8601")


def register(command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add the re-run commands to the `dispatcher` parser."""
    failed = command(
        "failed",
        command_failed,
        "List the failed executions in the failure spool: name, status, error, when; with counts.",
        "  dispatcher --stack jobs failed\n"
        "  dispatcher --stack jobs failed --status TIMED_OUT --since 3h\n"
        "  dispatcher --stack jobs failed --error 'Api*' --json\n",
    )
    _add_filters(failed)
    failed.add_argument("--dry-run", action="store_true", help="accepted: listing never changes anything")

    rerun = command(
        "rerun",
        command_rerun,
        "Re-run spooled failures through the dispatcher and its cap: --redrive continues each execution"
        " from its failed state; --restart starts it anew under a derived name.",
        "  dispatcher --stack jobs rerun --redrive --dry-run\n"
        "  dispatcher --stack jobs rerun --redrive --error 'Api*' --since 3h\n"
        "  dispatcher --stack jobs rerun --restart --max 50 --rate 5\n",
    )
    mode = rerun.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--redrive", action="store_true", help="RedriveExecution: the same execution, from its failed state"
    )
    mode.add_argument(
        "--restart", action="store_true", help="a new execution with the same input, in the job's group"
    )
    _add_filters(rerun)
    rerun.add_argument("--max", type=_count, metavar="N", help="re-run at most N executions (oldest first)")
    rerun.add_argument(
        "--rate", type=_rate, metavar="PER_SECOND", help="queue at most this many jobs a second"
    )
    rerun.add_argument(
        "--group", metavar="GROUP", help="queue every re-run in this group (else the job's recorded group)"
    )
    rerun.add_argument("--dry-run", action="store_true", help="show what would be queued; change nothing")

    dead_letters = command(
        "dead-letters",
        command_dead_letters,
        "List the dead-letter queue with each message's DispatchError.",
        "  dispatcher --stack jobs dead-letters\n  dispatcher --stack jobs dead-letters --json\n",
    )
    dead_letters.add_argument(
        "--dry-run", action="store_true", help="accepted: listing never changes anything"
    )
    redrive = command(
        "redrive-dead-letters",
        command_redrive_dead_letters,
        "Move dead letters back to the job queue once their cause is fixed: same body, group and"
        " attributes, without DispatchError; group order kept; safe to interrupt and run again.",
        "  dispatcher --stack jobs redrive-dead-letters --dry-run\n"
        "  dispatcher --stack jobs redrive-dead-letters --rate 10\n",
    )
    redrive.add_argument("--max", type=_count, metavar="N", help="move at most N dead letters")
    redrive.add_argument("--rate", type=_rate, metavar="PER_SECOND", help="move at most this many a second")
    redrive.add_argument("--dry-run", action="store_true", help="show what would move; change nothing")
