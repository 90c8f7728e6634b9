"""`dispatcher job` and `dispatcher cancel`: where a job is, and taking it back before it starts.

Both go through `dispatcher.following`, as the producer client does: that module says why a
``cancelled`` answer stays true while ticks run.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import TextIO

from dispatcher.cli.args import AddCommand
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.errors import UsageError
from dispatcher.cli.output import when
from dispatcher.core.control import steer
from dispatcher.core.jobs import CANCELLATION_LIFETIME_SECONDS, JobReport
from dispatcher.core.rerun import iso
from dispatcher.following import ALREADY_STARTED, CancelAnswer, Jobs, UnknownLaneError

NEEDS = ["queue_url", "dead_letter_queue_url", "state_machine_arn", "state_table"]
CANCELLATION_DAYS = CANCELLATION_LIFETIME_SECONDS // 86_400


def needs(_args: argparse.Namespace, _resources: Resources) -> Iterable[str]:
    """The lanes (found with the default lane's settings) and the state table."""
    return NEEDS


def jobs_of(aws: Aws, resources: Resources) -> Jobs:
    """The dispatcher's jobs, its lanes as steered now (the control parameter's too)."""
    control = control_parameter(aws, resources)
    topology = steer(
        resources.topology(resources.max_concurrency or 0),
        None if control is None else control.read(),
        resources.control_parameter,
    )
    return Jobs(aws.client("dynamodb"), aws.client("stepfunctions"), resources.need("state_table"), topology)


def said(report: JobReport) -> str:
    """A job's state as a few lines: the state first, then what is known of it (times in UTC)."""
    lines = [f"{report.name} (lane {report.lane}): {report.state}"]
    moments = {
        "started at": report.started_at,
        "stopped at": report.stopped_at,
        "deadline": report.deadline,
        "at": report.at,
        "sent at": report.sent_at,
        "dropped at": report.dropped_at,
    }
    fields: list[tuple[str, str | None]] = [("execution", report.execution_arn), ("error", report.error)]
    fields += [(label, None if moment is None else when(moment)) for label, moment in moments.items()]
    fields += [("reason", report.reason), ("re-run as", report.rerun_as)]
    lines += [f"  {label:<11} {value}" for label, value in fields if value]
    if report.in_advance:
        lines.append(
            "  cancelled in advance: its name was cancelled before it was sent, so a tick dropped it"
        )
    return "\n".join(lines) + "\n"


def command_job(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Print one job's state (exit 0 whatever it is)."""
    try:
        report = jobs_of(aws, resources).job(args.name, args.lane)
    except ValueError as error:  # an unknown lane (`UnknownLaneError`), or not a name
        raise UsageError(str(error)) from error
    out.write(json.dumps(report.as_json()) + "\n" if args.json else said(report))
    return 0


def command_cancel(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Cancel one job, or a message group's (exit 1 when the job had already started)."""
    if (args.name is None) == (args.group is None):
        raise UsageError("give a job's NAME, or --group G (not both)")
    if args.group is not None and args.stop:
        raise UsageError("--stop stops one job's execution: give its NAME, not --group")
    jobs = jobs_of(aws, resources)
    try:
        if args.group is not None:
            return _cancel_group(jobs, args, out)
        answer = jobs.cancel(args.name, args.lane, args.reason, stop=args.stop)
    except (UnknownLaneError, ValueError) as error:
        raise UsageError(str(error)) from error
    if args.json:
        out.write(json.dumps(answer.as_json()) + "\n")
    else:
        _say_cancelled(answer, args, out)
    return 1 if answer.word == ALREADY_STARTED else 0


def _say_cancelled(answer: CancelAnswer, args: argparse.Namespace, out: TextIO) -> None:
    """What a cancellation did, in a line (and how to stop its execution, when it runs)."""
    if answer.execution is None and answer.seen:
        out.write(f"cancelled {answer.name} (lane {answer.lane}): it will never start\n")
    elif answer.execution is None:
        out.write(
            f"cancelled {answer.name} (lane {answer.lane}): it will never start; no job of that name"
            f" was seen yet (queued, or not sent: one sent within {CANCELLATION_DAYS} days is dropped)\n"
        )
    else:
        execution = answer.execution
        out.write(f"{answer.word} {answer.name} (lane {answer.lane}): {execution.arn} {execution.status}\n")
        if answer.word == ALREADY_STARTED and not args.stop and execution.status == "RUNNING":
            lane = "" if args.lane is None else f" --lane {answer.lane}"
            out.write(f"  to stop it too: dispatcher cancel {answer.name}{lane} --stop\n")


def _cancel_group(jobs: Jobs, args: argparse.Namespace, out: TextIO) -> int:
    cancellation = jobs.cancel_group(args.group, args.lane, args.reason)
    lane = jobs.lane(args.lane).name
    if args.json:
        document = {"group": cancellation.group, "lane": lane, "answer": "cancelled"}
        out.write(json.dumps({**document, "sent_before": iso(cancellation.before)}) + "\n")
    else:
        out.write(
            f"cancelled message group {cancellation.group} (lane {lane}): its jobs sent until"
            f" {when(cancellation.before)} UTC that have not started never will\n"
        )
    return 0


def register(command: AddCommand) -> None:
    """Add `job` and `cancel`."""
    job = command(
        "job",
        command_job,
        "Show where one job is: running, succeeded, failed, ..., cancelled, expired, held, not started.",
        "  dispatcher --stack jobs job order-42\n"
        "  dispatcher --stack jobs job order-42 --lane urgent --json\n",
        needs=needs,
    )
    job.add_argument(
        "name", metavar="NAME", help="the job's execution name (its ExecutionName, else MessageId)"
    )
    job.add_argument("--lane", metavar="NAME", help="the job's lane (default: lane default)")
    cancel = command(
        "cancel",
        command_cancel,
        "Cancel a job that has not started (it never will), or a message group's jobs.",
        "  dispatcher --stack jobs cancel order-99 --reason 'upload deleted'\n"
        "  dispatcher --stack jobs cancel order-98 --stop      # and stop it if it is running\n"
        "  dispatcher --stack jobs cancel --group customer-7 --reason 'tenant left'\n",
        needs=needs,
    )
    cancel.add_argument("name", nargs="?", metavar="NAME", help="the job's execution name")
    cancel.add_argument("--group", metavar="G", help="cancel every job of this message group sent until now")
    cancel.add_argument("--lane", metavar="NAME", help="the job's lane (default: lane default)")
    cancel.add_argument("--reason", metavar="TEXT", help="why (kept with the job; the cause of a stop)")
    cancel.add_argument(
        "--stop",
        action="store_true",
        help="if it is running, stop it (StopExecution, error dispatcher.Cancelled)",
    )
