"""`dispatcher dead-letters` and `redrive-dead-letters`: a lane's or gate's DLQ, and moving it back.

Each reads the DLQ by receiving, holds what it read while it works, and gives back every
message it did not finish with, even on Ctrl-C or an error. ``--dry-run`` changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from dispatcher.adapters.queue_reading import QueueReading
from dispatcher.adapters.sqs import send_message
from dispatcher.cli.args import AddCommand, count, rate
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.members import add_member_options, lanes_needs, named_member
from dispatcher.cli.output import short, table
from dispatcher.cli.progress import Pace, Progress, of
from dispatcher.core.dead_letters import MOVED_BY_SQS, DeadLetterMove, plan_move, reasons
from dispatcher.waking import Waker

DEAD_LETTER_VISIBILITY_SECONDS = 120


def queues(args: argparse.Namespace, resources: Resources) -> tuple[str, str, str]:
    """The member ``--lane``/``--gate`` names (default: lane default): its label, its queue and its DLQ."""
    found = named_member(args, resources)
    if found is None:
        return "lane default", resources.need("queue_url"), resources.need("dead_letter_queue_url")
    return f"{found.kind} {found.name}", found.queue_url, found.dead_letter_queue_url


def command_dead_letters(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """List one member's dead-letter queue with each message's DispatchError."""
    member, _, dead_letter_queue_url = queues(args, resources)
    queue = QueueReading(aws.client("sqs"), dead_letter_queue_url, visibility_seconds=30)
    try:
        moves = [plan_move(held) for held in queue.read_all()]
        depth = queue.depth()
    finally:
        queue.show_all_again()
    hidden = max(0, depth - len(moves))
    if args.json:
        document = {
            "member": member,
            "dead_letters": [move.as_json() for move in moves],
            "total": len(moves),
            "reasons": reasons(moves),
            "not_listed": hidden,
        }
        out.write(json.dumps(document) + "\n")
        return 0
    of = "" if member == "lane default" else f" of {member}"
    if not moves:
        out.write(f"no dead letters{of}\n")
    else:
        rows = [
            [
                move.held.message_id,
                move.group,
                move.attributes.get("ExecutionName", {}).get("StringValue", "-"),
                short(move.reason or MOVED_BY_SQS, 70),
            ]
            for move in moves
        ]
        out.write(table(["MESSAGE ID", "GROUP", "NAME", "DISPATCH ERROR"], rows) + "\n\n")
        counted = ", ".join(f"{kind} {number}" for kind, number in reasons(moves).items())
        out.write(f"{len(moves)} dead letter(s){of}: {counted}\n")
    if hidden:
        out.write(
            f"{hidden} more not listed: a FIFO queue hides a group's later messages while earlier"
            " ones are being read, or another reader holds them\n"
        )
    return 0


def command_redrive_dead_letters(
    args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO
) -> int:
    """Move dead letters back to the member's queue, in group order; each leaves the DLQ once sent."""
    moved: list[DeadLetterMove] = []
    member, queue_url, dead_letter_queue_url = queues(args, resources)
    verb = "moved" if not args.dry_run else "listed"
    progress = Progress(quiet=args.json)

    def said() -> str:
        return (
            f"{len(moved):,} dead letter(s) {verb}; the rest are back on the DLQ: run the same command"
            " again to move them (nothing is moved or started twice)"
        )

    with progress.on_ctrl_c(said):
        waker = Waker(aws.client("sqs"), resources.wake_queue_url)
        _move_each(args, aws, (queue_url, dead_letter_queue_url), moved, progress, waker=waker)
    if moved:
        progress.show(of(verb, len(moved), None), len(moved), final=True)
    _report_moves(args, out, moved, member)
    return 0


def _move_each(  # noqa: PLR0913 — the command's arguments, where to and from, what it did, the wake
    args: argparse.Namespace,
    aws: Aws,
    urls: tuple[str, str],
    moved: list[DeadLetterMove],
    progress: Progress,
    *,
    waker: Waker,
) -> None:
    """Move dead letters one at a time, in group order, until --max or none is left; holds given back.

    ``urls``: the queue they go back to, and the DLQ they come from; each job moved wakes the
    dispatcher (at most once a second).
    """
    queue_url, dead_letter_queue_url = urls
    queue = QueueReading(
        aws.client("sqs"), dead_letter_queue_url, visibility_seconds=DEAD_LETTER_VISIBILITY_SECONDS
    )
    verb = "moved" if not args.dry_run else "listed"
    pace = Pace(args.rate)
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
                    send_message(
                        aws.client("sqs"),
                        queue_url,
                        move.held.body,
                        move.group,
                        move.deduplication_id,
                        dict(move.attributes),
                    )
                    waker.wake()
                    if queue.delete([held]):
                        sys.stderr.write(
                            f"moved {held.message_id}, but it stays on the DLQ: moving it again sends"
                            " nothing new within 5 minutes, and never starts it twice\n"
                        )
                moved.append(move)
                progress.show(of(verb, len(moved), None), len(moved))
    finally:
        queue.show_all_again()


def _report_moves(args: argparse.Namespace, out: TextIO, moved: list[DeadLetterMove], member: str) -> None:
    if args.json:
        document = {
            "member": member,
            "dry_run": bool(args.dry_run),
            "moved": [{**move.as_json(), "deduplication_id": move.deduplication_id} for move in moved],
            "total": len(moved),
        }
        out.write(json.dumps(document) + "\n")
        return
    verb = "would move" if args.dry_run else "moved"
    for move in moved:
        name = move.attributes.get("ExecutionName", {}).get("StringValue", "-")
        was = short(move.reason, 60)
        out.write(f"{verb} {move.held.message_id} (group {move.group}, name {name}): was {was}\n")
    where = "the job queue" if member == "lane default" else f"the queue of {member}"
    summary = f"{verb} {len(moved)} dead letter(s) to {where}"
    out.write(summary + (" (dry run: nothing changed)" if args.dry_run else "") + "\n")


def register(command: AddCommand) -> None:
    """Add `dead-letters` and `redrive-dead-letters`."""
    dead_letters = command(
        "dead-letters",
        command_dead_letters,
        "List a lane's or a gate's dead-letter queue with each message's DispatchError.",
        "  dispatcher --stack jobs dead-letters\n"
        "  dispatcher --stack jobs dead-letters --json\n"
        "  dispatcher --stack jobs dead-letters --lane urgent\n"
        "  dispatcher --stack jobs dead-letters --gate crawl   # requests that could never be admitted\n",
        needs=lambda args, _resources: ["dead_letter_queue_url", *lanes_needs(args)],
    )
    add_member_options(dead_letters, "list the dead letters of", default="lane")
    dead_letters.add_argument(
        "--dry-run", action="store_true", help="accepted: listing never changes anything"
    )
    redrive = command(
        "redrive-dead-letters",
        command_redrive_dead_letters,
        "Move dead letters back to their lane's (or gate's) queue once their cause is fixed: same body,"
        " group and attributes, without DispatchError; group order kept; safe to interrupt and run again.",
        "  dispatcher --stack jobs redrive-dead-letters --dry-run\n"
        "  dispatcher --stack jobs redrive-dead-letters --rate 10\n"
        "  dispatcher --stack jobs redrive-dead-letters --lane urgent\n",
        needs=lambda args, _resources: ["queue_url", "dead_letter_queue_url", *lanes_needs(args)],
    )
    add_member_options(redrive, "move the dead letters of", default="lane")
    redrive.add_argument("--max", type=count, metavar="N", help="move at most N dead letters")
    redrive.add_argument("--rate", type=rate, metavar="PER_SECOND", help="move at most this many a second")
    redrive.add_argument("--dry-run", action="store_true", help="show what would move; change nothing")
