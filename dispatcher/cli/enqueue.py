"""`dispatcher enqueue`: one job, or JSON Lines in bulk, sent with the producer client."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from dispatcher.cli.args import AddCommand, deadline
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.errors import PROG, UsageError
from dispatcher.cli.members import named_member
from dispatcher.cli.progress import Progress, StopAsked
from dispatcher.core.executions import input_problem, name_problem
from dispatcher.core.messages import Job, group_problem, slots_problem
from dispatcher.producer import Producer, SendResult

LINE_KEYS = ("input", "body", "group", "name", "slots")
"""What a JSON Lines record may hold: a key beyond these is a mistake (a misspelt name would
start under a random name, a ``"lane"`` would go to the default lane), never silently dropped."""


def _body_problems(field: str, body: object) -> list[str]:
    if not isinstance(body, str):
        return ['"body" must be a string of JSON text (or use "input" for JSON itself)']
    problem = input_problem(body)
    return [] if problem is None else [f'"{field}": {problem}']


def _group_problems(group: object) -> list[str]:
    if group is None:
        return ['no "group" (add one, or pass --group for every line)']
    if not isinstance(group, str):
        return [f'"group" must be a string, not {json.dumps(group)}']
    problem = group_problem(group)
    return [] if problem is None else [f'"group": {problem}']


def _name_problems(name: object) -> list[str]:
    if name is None:
        return []
    if not isinstance(name, str):
        return [f'"name" must be a string, not {json.dumps(name)}']
    problem = name_problem(name)
    return [] if problem is None else [f'"name": {problem}']


def _slots_problems(slots: object) -> list[str]:
    problem = None if slots is None else slots_problem(slots)
    return [] if problem is None else [f'"slots": {problem}']


def _field_problems(record: dict[str, Any], default_group: str | None) -> tuple[Job | None, list[str]]:
    """The job of one JSON Lines record, or what is wrong with it, naming the fields as written."""
    unknown = [key for key in record if key not in LINE_KEYS]
    if unknown:
        keys = ", ".join(json.dumps(key) for key in unknown)
        hint = " (a lane is chosen with --lane)" if "lane" in unknown else ""
        return None, [f"unknown key {keys}: a line holds {', '.join(map(json.dumps, LINE_KEYS))}{hint}"]
    field = "body" if "body" in record else "input"
    body = record[field] if field == "body" else json.dumps(record["input"])
    group = record.get("group", default_group)
    name, slots = record.get("name"), record.get("slots")
    problems = [
        *_body_problems(field, body),
        *_group_problems(group),
        *_name_problems(name),
        *_slots_problems(slots),
    ]
    if problems:
        return None, problems
    return Job(str(body), str(group), name, slots=slots), []


@dataclass
class JobLines:
    """What a JSON Lines file holds: its jobs (each once), and what is wrong with it."""

    jobs: list[Job] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    """Each job's line number in the file."""
    problems: list[str] = field(default_factory=list)
    duplicates: int = 0
    """Lines that repeat an earlier line's name and input: one job, sent once (SQS would drop the rest)."""


def _record(line: str) -> dict[str, Any] | str:
    """One line's object, or what is wrong with it."""
    try:
        record = json.loads(line)
    except ValueError as error:
        return f"not JSON: {error}"
    if not isinstance(record, dict) or ("input" in record) == ("body" in record):
        return 'expected an object with "input" (JSON) or "body" (text)'
    return record


def jobs_from_lines(lines: Iterator[str], source: str, default_group: str | None) -> JobLines:
    """JSON Lines: {"input": <JSON>} or {"body": "<JSON text>"}, with "group" and optional "name".

    Every line is read and checked. A line that repeats an earlier one's name and input is
    the same job (counted in ``duplicates``); the same name with another input is a name
    collision, which the dispatcher would dead-letter: a problem naming both lines.
    """
    found = JobLines()
    named: dict[str, tuple[int, Job]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _record(line)
        if isinstance(record, str):
            found.problems.append(f"{source}:{number}: {record}")
            continue
        job, wrong = _field_problems(record, default_group)
        found.problems += [f"{source}:{number}: {problem}" for problem in wrong]
        if job is None:
            continue
        if job.name is not None and job.name in named:
            first, earlier = named[job.name]
            if earlier.body == job.body:
                found.duplicates += 1
            else:
                found.problems.append(
                    f"{source}:{number}: name {job.name!r} is line {first}'s with another input:"
                    " a name collision (the dispatcher would dead-letter it)"
                )
            continue
        if job.name is not None:
            named[job.name] = (number, job)
        found.jobs.append(job)
        found.lines.append(number)
    return found


def _read_file(path: str) -> Iterator[str]:
    if path == "-":
        yield from sys.stdin
        return
    try:
        stream = open(path, encoding="utf-8")  # noqa: SIM115 — read line by line below
    except OSError as error:
        raise UsageError(f"--file: cannot read {path}: {error.strerror}") from error
    with stream:
        try:
            yield from stream
        except UnicodeDecodeError as error:
            raise UsageError(f"--file: {path} is not UTF-8 text: {error.reason}") from error


def prepare_enqueue(args: argparse.Namespace) -> list[str]:
    """Read and check every job before anything is sent (``args.jobs``); the problems found."""
    args.jobs, args.duplicates, args.lines = [], 0, []
    if args.file is not None:
        return _prepare_file(args)
    if args.body is None:
        return ["give the job's input as BODY (or - to read it from standard input), or --file"]
    body = sys.stdin.read() if args.body == "-" else args.body
    problems = [f"BODY: {problem}" for problem in [input_problem(body)] if problem]
    problems += _option_problems(args.group, args.name)
    if not problems:
        args.jobs = [Job(body, str(args.group), args.name, start_by=args.start_by, slots=args.slots)]
    return problems


def _option_problems(group: str | None, name: str | None) -> list[str]:
    """What is wrong with one job's ``--group`` and ``--name``."""
    problems = []
    if group is None:
        problems.append("--group is required for one job (the SQS FIFO MessageGroupId)")
    elif (problem := group_problem(group)) is not None:
        problems.append(f"--group: {problem}")
    if name is not None and (problem := name_problem(name)) is not None:
        problems.append(f"--name: {problem}")
    return problems


def _prepare_file(args: argparse.Namespace) -> list[str]:
    """`prepare_enqueue` for ``--file``: every line read and checked."""
    if args.body is not None or args.name is not None:
        return ["give either BODY (one job) or --file (JSON Lines), not both; --name is per line"]
    try:
        found = jobs_from_lines(_read_file(args.file), args.file, args.group)
    except UsageError as error:
        return list(error.problems)
    collisions = sum("a name collision" in problem for problem in found.problems)
    if collisions > 1:
        found.problems.append(f"{collisions} name collisions in {args.file}: nothing was sent")
    args.jobs, args.duplicates, args.lines = _with_options(args, found.jobs), found.duplicates, found.lines
    return found.problems


def _with_options(args: argparse.Namespace, jobs: list[Job]) -> list[Job]:
    """The file's jobs with ``--start-by``, and ``--slots`` where a line gave no size."""
    if args.start_by is not None:
        jobs = [replace(job, start_by=args.start_by) for job in jobs]
    if args.slots is not None:
        jobs = [job if job.slots is not None else replace(job, slots=args.slots) for job in jobs]
    return jobs


def command_enqueue(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Send the jobs `prepare_enqueue` read, with the producer client.

    Ctrl-C stops between batches (the batch in flight is sent and counted), so what it
    says was sent is exactly what is on the queue; a second Ctrl-C stops at once.
    """
    lane = named_member(args, resources)
    queue_url = resources.need("queue_url") if lane is None else lane.queue_url
    producer = Producer(queue_url, client=aws.client("sqs"), wake_queue_url=resources.wake_queue_url or "")
    jobs: list[Job] = args.jobs
    if not jobs:
        # An empty file (or standard input): nothing is wrong, but say so.
        return _report(args, SendResult(), out, empty=args.file)
    progress = Progress(last_line=True)
    so_far = SendResult()
    with StopAsked() as stop:

        def show(result: SendResult) -> None:
            so_far.sent, so_far.failed = list(result.sent), list(result.failed)
            if len(jobs) > 1 and not args.json:
                done = len(result.sent) + len(result.failed)
                line = f"sent {len(result.sent):,}/{len(jobs):,}, failed {len(result.failed):,}"
                progress.show(line, done, final=done == len(jobs))
            if len(result.sent) + len(result.failed) < len(jobs):
                stop.check()

        source = None if args.file is None else ("standard input" if args.file == "-" else args.file)
        with progress.on_ctrl_c(lambda: _interrupted(jobs, so_far, args.lines, source)):
            result = producer.send_batch(jobs, progress=show)
    return _report(args, result, out, duplicates=args.duplicates)


def _interrupted(jobs: list[Job], so_far: SendResult, lines: list[int], source: str | None) -> str:
    """What an interrupted `enqueue` sent (which lines of a file), and whether sending the same again is safe.

    Batches go out side by side, so what was sent needn't be the file's first lines.
    """
    line = f"{len(so_far.sent):,} of {len(jobs):,} job(s) sent"
    if so_far.sent and lines:
        numbers = {id(job): number for job, number in zip(jobs, lines, strict=True)}
        line += f" ({line_ranges(sorted(numbers[id(sent.job)] for sent in so_far.sent))} of {source})"
    if not so_far.sent:
        return f"{line}; sending them again is safe"
    unnamed = sum(job.name is None for job in jobs)
    if not unnamed:
        return f"{line}; sending the same jobs again is safe: each has a name, and starts once"
    return (
        f"{line}; {unnamed:,} have no name: sent again, those sent already would start twice"
        " (send only the rest, or give every job a name)"
    )


def line_ranges(numbers: list[int], shown: int = 6) -> str:
    """Sorted line numbers as ranges, ``lines 1-10, 21-30``; past ``shown`` ranges, how many more."""
    ranges: list[list[int]] = []
    for number in numbers:
        if ranges and number == ranges[-1][1] + 1:
            ranges[-1][1] = number
        else:
            ranges.append([number, number])
    said = [f"{first}-{last}" if first != last else str(first) for first, last in ranges]
    more = f" and {len(said) - shown} more range(s)" if len(said) > shown else ""
    return f"line{'s' if len(numbers) > 1 else ''} {', '.join(said[:shown])}{more}"


def _report(
    args: argparse.Namespace, result: SendResult, out: TextIO, empty: str | None = None, duplicates: int = 0
) -> int:
    if empty is not None and not args.json:
        out.write(f"nothing to send: {'standard input' if empty == '-' else empty} holds no jobs\n")
        return 0
    if args.json:
        _report_json(result, out, duplicates)
    else:
        _report_text(result, out, duplicates)
    return 0 if result.ok else 1


def _report_json(result: SendResult, out: TextIO, duplicates: int) -> None:
    document = {
        "sent": [
            {"message_id": sent.message_id, "group": sent.job.group, "name": sent.job.name}
            for sent in result.sent
        ],
        "failed": [
            {"group": failure.job.group, "name": failure.job.name, "reason": failure.reason}
            for failure in result.failed
        ],
        "duplicates": duplicates,
    }
    out.write(json.dumps(document) + "\n")


def _report_text(result: SendResult, out: TextIO, duplicates: int) -> None:
    for sent in result.sent if len(result.sent) == 1 else []:
        out.write(
            f"sent {sent.message_id} (group {sent.job.group}, name {sent.job.name or sent.message_id})\n"
        )
    if len(result.sent) > 1 or duplicates:
        line = f"sent {len(result.sent):,} job(s)"
        if duplicates:
            line += f"; {duplicates:,} line(s) repeated an earlier line's name and input: sent once"
        out.write(line + "\n")
    for failure in result.failed:
        label = f"name {failure.job.name}" if failure.job.name else "no name"
        sys.stderr.write(f"{PROG}: not sent (group {failure.job.group}, {label}): {failure.reason}\n")


def register(command: AddCommand) -> None:
    """Add `enqueue`."""
    enqueue = command(
        "enqueue",
        command_enqueue,
        "Send one job, or JSON Lines in bulk, checked with the dispatcher's own rules.",
        "  dispatcher enqueue '{\"order\": 42}' --group customer-7 --name order-42\n"
        "  echo '{\"order\": 43}' | dispatcher enqueue - --group customer-7\n"
        '  dispatcher enqueue --file jobs.jsonl     # lines: {"input": {...}, "group": "g", "name": "n"}\n'
        "  cat jobs.jsonl | dispatcher enqueue --file - --group default\n"
        "  dispatcher --stack jobs enqueue '{\"order\": 44}' --group customer-7 --lane urgent\n"
        "  dispatcher enqueue '{\"order\": 45}' --group customer-7 --name order-45 --start-by 30m\n"
        "  dispatcher enqueue '{\"dpus\": 40}' --group nightly --name big-join --slots 40\n",
        needs=lambda args, _resources: (
            ["queue_url"]
            if args.lane is None
            else ["queue_url", "dead_letter_queue_url", "state_machine_arn"]
        ),
        prepare=prepare_enqueue,
    )
    enqueue.add_argument(
        "body", nargs="?", metavar="BODY", help="the execution input (JSON); - reads standard input"
    )
    enqueue.add_argument("--group", help="the message group (FIFO order is kept within a group)")
    enqueue.add_argument("--name", help="the execution name (else the SQS MessageId)")
    enqueue.add_argument("--file", metavar="PATH", help="JSON Lines of jobs; - reads standard input")
    enqueue.add_argument("--lane", metavar="NAME", help="send to this lane's queue (default: lane default)")
    enqueue.add_argument(
        "--slots",
        metavar="N",
        type=slots_count,
        help="the pool's slots the job takes (an integer >= 1; default 1; a --file line's \"slots\" wins)",
    )
    enqueue.add_argument(
        "--start-by",
        metavar="WHEN",
        type=deadline,
        help="a deadline: received later, the job never starts (30m, 2h from now, or ISO 8601)",
    )


def slots_count(text: str) -> int:
    """``--slots``: an integer >= 1 (argparse makes anything else a usage error, exit 2)."""
    value = int(text) if text.strip().isascii() and text.strip().isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, not {text!r}")
    return value
