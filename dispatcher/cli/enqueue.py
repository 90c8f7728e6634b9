"""`dispatcher enqueue`: one job, or JSON Lines in bulk, sent with the producer client."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import TextIO

from dispatcher.cli.args import AddCommand
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.errors import PROG, CliError, UsageError
from dispatcher.cli.progress import Progress
from dispatcher.core.messages import Job
from dispatcher.producer import Producer, SendResult


def jobs_from_lines(lines: Iterator[str], source: str, default_group: str | None) -> Iterator[Job]:
    """JSON Lines: {"input": <JSON>} or {"body": "<JSON text>"}, with "group" and optional "name"."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise CliError(f"{source}:{number}: not JSON: {error}") from error
        if not isinstance(record, dict) or ("input" in record) == ("body" in record):
            raise CliError(f'{source}:{number}: expected an object with "input" (JSON) or "body" (text)')
        body = record["body"] if "body" in record else json.dumps(record["input"])
        group = record.get("group", default_group)
        if not isinstance(body, str) or not isinstance(group, str):
            raise CliError(f'{source}:{number}: "body" and "group" must be strings (or pass --group)')
        name = record.get("name")
        if name is not None and not isinstance(name, str):
            raise CliError(f'{source}:{number}: "name" must be a string')
        yield Job(body, group, name)


def _open(path: str) -> TextIO:
    try:
        return open(path, encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}") from error


def command_enqueue(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Send one job, or JSON Lines in bulk, with the producer client."""
    producer = Producer(resources.need("queue_url"), client=aws.client("sqs"))
    if args.file is not None:
        if args.body is not None or args.name is not None:
            raise UsageError(
                "give either BODY (one job) or --file (JSON Lines), not both; --name is per line"
            )
        stream = sys.stdin if args.file == "-" else _open(args.file)
        with stream:
            jobs = list(jobs_from_lines(iter(stream), args.file, args.group))
    else:
        if args.body is None:
            raise UsageError("give the job's input as BODY (or - to read it from standard input), or --file")
        if args.group is None:
            raise UsageError("--group is required for one job (the SQS FIFO MessageGroupId)")
        body = sys.stdin.read() if args.body == "-" else args.body
        jobs = [Job(body, args.group, args.name)]
    progress = Progress(last_line=True)

    def show(result: SendResult) -> None:
        done = len(result.sent) + len(result.failed)
        line = f"sent {len(result.sent):,}/{len(jobs):,}, failed {len(result.failed):,}"
        progress.show(line, done, final=done == len(jobs))

    result = producer.send_batch(jobs, progress=show if len(jobs) > 1 and not args.json else None)
    return _report(args, result, out)


def _report(args: argparse.Namespace, result: SendResult, out: TextIO) -> int:
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
        "  cat jobs.jsonl | dispatcher enqueue --file - --group default\n",
    )
    enqueue.add_argument(
        "body", nargs="?", metavar="BODY", help="the execution input (JSON); - reads standard input"
    )
    enqueue.add_argument("--group", help="the message group (FIFO order is kept within a group)")
    enqueue.add_argument("--name", help="the execution name (else the SQS MessageId)")
    enqueue.add_argument("--file", metavar="PATH", help="JSON Lines of jobs; - reads standard input")
