"""`dispatcher enqueue`: one job, or JSON Lines in bulk, sent with the producer client."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from dispatcher.cli.args import AddCommand
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.errors import PROG, UsageError
from dispatcher.cli.progress import Progress
from dispatcher.core.executions import input_problem, name_problem
from dispatcher.core.messages import Job, group_problem
from dispatcher.producer import Producer, SendResult


def _field_problems(record: dict[str, Any], default_group: str | None) -> tuple[Job | None, list[str]]:
    """The job of one JSON Lines record, or what is wrong with it, naming the fields as written."""
    field = "body" if "body" in record else "input"
    body = record[field] if field == "body" else json.dumps(record["input"])
    group = record.get("group", default_group)
    name = record.get("name")
    problems = []
    if not isinstance(body, str):
        problems.append('"body" must be a string of JSON text (or use "input" for JSON itself)')
    elif (problem := input_problem(body)) is not None:
        problems.append(f'"{field}": {problem}')
    if group is None:
        problems.append('no "group" (add one, or pass --group for every line)')
    elif not isinstance(group, str):
        problems.append(f'"group" must be a string, not {json.dumps(group)}')
    elif (problem := group_problem(group)) is not None:
        problems.append(f'"group": {problem}')
    if name is not None and not isinstance(name, str):
        problems.append(f'"name" must be a string, not {json.dumps(name)}')
    elif name is not None and (problem := name_problem(name)) is not None:
        problems.append(f'"name": {problem}')
    if problems:
        return None, problems
    return Job(str(body), str(group), name), []


def jobs_from_lines(
    lines: Iterator[str], source: str, default_group: str | None
) -> tuple[list[Job], list[str]]:
    """JSON Lines: {"input": <JSON>} or {"body": "<JSON text>"}, with "group" and optional "name".

    Every line is read and checked; the jobs, and one problem a line for each invalid one.
    """
    jobs: list[Job] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            problems.append(f"{source}:{number}: not JSON: {error}")
            continue
        if not isinstance(record, dict) or ("input" in record) == ("body" in record):
            problems.append(f'{source}:{number}: expected an object with "input" (JSON) or "body" (text)')
            continue
        job, wrong = _field_problems(record, default_group)
        problems += [f"{source}:{number}: {problem}" for problem in wrong]
        if job is not None:
            jobs.append(job)
    return jobs, problems


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
    args.jobs = []
    if args.file is not None:
        if args.body is not None or args.name is not None:
            return ["give either BODY (one job) or --file (JSON Lines), not both; --name is per line"]
        try:
            args.jobs, problems = jobs_from_lines(_read_file(args.file), args.file, args.group)
        except UsageError as error:
            return list(error.problems)
        return problems
    if args.body is None:
        return ["give the job's input as BODY (or - to read it from standard input), or --file"]
    body = sys.stdin.read() if args.body == "-" else args.body
    problems = [f"BODY: {problem}" for problem in [input_problem(body)] if problem]
    if args.group is None:
        problems.append("--group is required for one job (the SQS FIFO MessageGroupId)")
    elif (problem := group_problem(args.group)) is not None:
        problems.append(f"--group: {problem}")
    if args.name is not None and (problem := name_problem(args.name)) is not None:
        problems.append(f"--name: {problem}")
    if not problems:
        args.jobs = [Job(body, str(args.group), args.name)]
    return problems


def command_enqueue(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Send the jobs `prepare_enqueue` read, with the producer client."""
    queue_url = resources.need("queue_url") if args.lane is None else resources.lane(args.lane).queue_url
    producer = Producer(queue_url, client=aws.client("sqs"))
    jobs: list[Job] = args.jobs
    if not jobs:
        # An empty file (or standard input): nothing is wrong, but say so.
        return _report(args, SendResult(), out, empty=args.file)
    progress = Progress(last_line=True)
    so_far = SendResult()

    def show(result: SendResult) -> None:
        so_far.sent, so_far.failed = list(result.sent), list(result.failed)
        if len(jobs) == 1 or args.json:
            return
        done = len(result.sent) + len(result.failed)
        line = f"sent {len(result.sent):,}/{len(jobs):,}, failed {len(result.failed):,}"
        progress.show(line, done, final=done == len(jobs))

    with progress.on_ctrl_c(lambda: _interrupted(jobs, so_far)):
        result = producer.send_batch(jobs, progress=show)
    return _report(args, result, out)


def _interrupted(jobs: list[Job], so_far: SendResult) -> str:
    """What an interrupted `enqueue` sent, and whether sending the same jobs again is safe."""
    line = f"{len(so_far.sent):,} of {len(jobs):,} job(s) sent"
    if not so_far.sent:
        return f"{line}; sending them again is safe"
    unnamed = sum(job.name is None for job in jobs)
    if not unnamed:
        return f"{line}; sending the same jobs again is safe: each has a name, and starts once"
    return (
        f"{line}; {unnamed:,} have no name: sent again, those sent already would start twice"
        " (send only the rest, or give every job a name)"
    )


def _report(args: argparse.Namespace, result: SendResult, out: TextIO, empty: str | None = None) -> int:
    if empty is not None and not args.json:
        out.write(f"nothing to send: {'standard input' if empty == '-' else empty} holds no jobs\n")
        return 0
    if args.json:
        document = {
            "sent": [
                {"message_id": sent.message_id, "group": sent.job.group, "name": sent.job.name}
                for sent in result.sent
            ],
            "failed": [
                {"group": failure.job.group, "name": failure.job.name, "reason": failure.reason}
                for failure in result.failed
            ],
        }
        out.write(json.dumps(document) + "\n")
    else:
        for sent in result.sent if len(result.sent) == 1 else []:
            out.write(
                f"sent {sent.message_id} (group {sent.job.group}, name {sent.job.name or sent.message_id})\n"
            )
        if len(result.sent) > 1:
            out.write(f"sent {len(result.sent):,} job(s)\n")
        for failure in result.failed:
            label = f"name {failure.job.name}" if failure.job.name else "no name"
            sys.stderr.write(f"{PROG}: not sent (group {failure.job.group}, {label}): {failure.reason}\n")
    return 0 if result.ok else 1


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
        "  dispatcher --stack jobs enqueue '{\"order\": 44}' --group customer-7 --lane urgent\n",
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
