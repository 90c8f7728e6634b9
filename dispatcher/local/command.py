"""`dispatcher local`: the embedded AWS emulator with a dispatcher stack, ticking like the schedule.

Everything the CLI does can be tried here without an AWS account or Docker. The stack
is a CloudFormation stack in the emulator with the outputs the real template declares,
so ``--stack`` works against it as against AWS. Local only: needs the ``local`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import boto3

from dispatcher.cli.errors import CliError
from dispatcher.core.events import failure_pattern, refill_pattern
from dispatcher.in_process import tick_here
from dispatcher.local.account import FAKE_CREDENTIALS, REGION, local_client, pointed_at
from dispatcher.local.emulation import SETTLED_PATH
from dispatcher.local.events import Rule, sqs_event, to_queue
from dispatcher.local.gates import GATE, create_gate, create_release_queue, gated_name
from dispatcher.local.server import emulated_server
from dispatcher.local.stack import (
    create_lane,
    create_stack,
    function_name,
    register_stack,
    set_downstream,
    workflow_name,
)


def exports(endpoint_url: str) -> list[str]:
    """The shell lines that point the AWS SDKs and CLIs at the emulator."""
    variables = {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint_url}
    return [f"export {key}={value}" for key, value in variables.items()]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the server binds: connections of a stopped emulator in TIME_WAIT don't hold the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def serve(  # noqa: PLR0913 — one keyword per command-line option
    *,
    port: int,
    stack: str,
    max_concurrency: int,
    wait_seconds: float,
    schedule_seconds: float,
    out: TextIO,
    lanes: Sequence[tuple[str, int]] = (),
    gate: bool = False,
) -> int:
    """Run the emulator until interrupted; tick every ``schedule_seconds`` (0: never).

    ``lanes``: (name, priority) of more lanes into the stack's state machine and pool.
    ``gate``: gate ``gate`` on the sample gated workflow, in pool default; its releases
    and ends reach the ticks in batches, as through the template's end-event queue.
    """
    if port and not _port_free(port):
        raise CliError(f"port {port} is in use: pass --port with a free one")
    with emulated_server(port=port) as (endpoint_url, emulation), pointed_at(endpoint_url):
        resources = create_stack(stack, wait_seconds=wait_seconds, downstream=True)
        documents = [
            create_lane(stack, name, state_machine_arn=resources.state_machine_arn, priority=priority)
            for name, priority in lanes
        ]
        document: dict[str, Any] = {"lanes": documents} if documents else {}
        release_queue = create_release_queue(stack) if gate else None
        if release_queue is not None:
            gated = create_gate(
                stack, GATE, release_queue_url=release_queue, free_seconds=1, section_seconds=wait_seconds
            )
            document["gates"] = [gated]
            emulation.rules.append(
                Rule(refill_pattern(gated["state_machine_arn"]), to_queue(release_queue, endpoint_url))
            )
        lanes_variable = json.dumps(document) if document else ""
        register_stack(stack, resources, max_concurrency, function=function_name(stack), lanes=lanes_variable)
        ended = threading.Event()
        ticking = threading.Lock()  # the handler's module state serves one tick at a time

        def tick(event: dict[str, Any] | None = None) -> dict[str, Any]:
            with ticking:
                overrides = {"lanes": lanes_variable} if lanes_variable else {}
                return tick_here(resources.environment(max_concurrency, **overrides), "WARNING", event)

        emulation.functions[function_name(stack)] = tick
        if release_queue is not None:
            threading.Thread(
                target=_deliver_batches, args=(release_queue, endpoint_url, tick, out), daemon=True
            ).start()
        emulation.rules += [
            Rule(
                failure_pattern(resources.state_machine_arn),
                to_queue(resources.spool_queue_url, endpoint_url),
            ),
            Rule(refill_pattern(resources.state_machine_arn), lambda _event: ended.set()),
        ]
        lines = [
            f"Emulator ready at {endpoint_url} with stack {stack!r}"
            f" (MAX {max_concurrency}, each sample execution runs {wait_seconds:g} s,"
            " then calls a simulated downstream API)"
            + (
                f"; lanes {', '.join(f'{name} (priority {priority})' for name, priority in lanes)}"
                " into the same state machine and pool."
                if lanes
                else "."
            )
            + (
                f" Gate {GATE} (pool default) guards the section of the sample gated workflow"
                f" {gated_name(stack)} ({wait_seconds:g} s)."
                if gate
                else ""
            ),
            "In another shell:",
            "",
            *(f"  {line}" for line in exports(endpoint_url)),
            "",
            f"  dispatcher --stack {stack} status",
            f"  dispatcher --stack {stack} enqueue '{{\"job\": 1}}' --group demo",
            *(
                f"  dispatcher --stack {stack} enqueue '{{\"job\": 2}}' --group demo --lane {name}"
                for name, _ in lanes[:1]
            ),
            *(
                [f"  python -m dispatcher.local gated 10 --stack {stack}   # ten executions reach the gate"]
                if gate
                else []
            ),
            f"  dispatcher --stack {stack} tick            # or tick --invoke: the emulated function",
            "  python -m dispatcher.local downstream down   # executions fail until 'up'",
            f"  dispatcher --stack {stack} failed",
            "",
            (
                f"Ticking every {schedule_seconds:g} s and whenever an execution ends,"
                " like the deployed function."
                if schedule_seconds > 0
                else f"Not ticking by itself (--schedule 0): run `dispatcher --stack {stack} tick`."
            ),
            "State lives in memory: queues, executions and the table are gone when this stops. Ctrl-C stops.",
        ]
        out.write("\n".join(lines) + "\n")
        out.flush()
        _tick_on_schedule(tick, schedule_seconds, ended, out)
    return 0


def _deliver_batches(
    queue_url: str, endpoint_url: str, tick: Callable[[dict[str, Any]], dict[str, Any]], out: TextIO
) -> None:
    """The end-event queue's event source mapping: its releases and ends, to a tick, ten at a time."""
    sqs = local_client("sqs", endpoint_url)
    while True:
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["SentTimestamp"]
        ).get("Messages", [])
        if not messages:
            continue
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(index), "ReceiptHandle": m["ReceiptHandle"]} for index, m in enumerate(messages)
            ],
        )
        sent = [int(message["Attributes"]["SentTimestamp"]) / 1000 for message in messages]
        _said(out, tick(sqs_event([message["Body"] for message in messages], sent_at=sent)))


def _said(out: TextIO, report: dict[str, Any]) -> None:
    """One line for a tick that started, admitted or dead-lettered something."""
    if report.get("started") or report.get("dead_lettered") or report.get("admitted"):
        out.write(
            f"{time.strftime('%H:%M:%S')} tick: running {report['running']},"
            f" started {report['started']}"
            + (f" ({report['redriven']} redriven)" if report.get("redriven") else "")
            + (f", admitted {report['admitted']}" if "admitted" in report else "")
            + f", dead-lettered {report['dead_lettered']}\n"
        )
        out.flush()


WAKE_SECONDS = 0.5
"""The main thread never waits longer than this at once. Ctrl-C may be delivered to any
thread (moto runs each execution on threads of its own), and Python raises it in the main
thread only when that thread next runs: a main thread asleep for the schedule would miss it
until the sleep ends."""


def _tick_on_schedule(
    tick: Callable[[], dict[str, Any]], schedule_seconds: float, ended: threading.Event, out: TextIO
) -> None:
    """Tick like the deployed function: every ``schedule_seconds``, and when an execution ends.

    ``schedule_seconds`` 0: never by itself, only the ticks run with `dispatcher tick`.
    """
    due = time.monotonic() + schedule_seconds
    while True:
        an_end = ended.wait(WAKE_SECONDS)
        if schedule_seconds <= 0:
            ended.clear()
            continue
        if an_end or time.monotonic() >= due:
            ended.clear()
            _said(out, tick())
            due = time.monotonic() + schedule_seconds


def downstream(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """``python -m dispatcher.local downstream down|up [--stack NAME]``: the simulated API's state."""
    parser = argparse.ArgumentParser(
        prog="python -m dispatcher.local downstream",
        description="Bring the simulated downstream API of `dispatcher local` down, or back up.",
    )
    parser.add_argument("state", choices=["down", "up"])
    parser.add_argument("--stack", default="dispatcher-local", help="the emulated stack (dispatcher-local)")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    set_downstream(f"{args.stack}-downstream", up=args.state == "up")
    out.write(
        f"downstream API {args.state}: "
        + ("executions fail with DownstreamUnavailable\n" if args.state == "down" else "executions succeed\n")
    )
    return 0


SETTLE_POLL_SECONDS = 0.1


def settle(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """``python -m dispatcher.local settle [--stack NAME] [--timeout S]``: wait until all has ended.

    Until no execution runs and every status change event is delivered.

    What the docs' sessions do between ticks instead of sleeping: the sample executions
    take as long as the machine lets them, and a session that slept a guess would show
    other counts on a busy machine.
    """
    parser = argparse.ArgumentParser(
        prog="python -m dispatcher.local settle",
        description="Wait until no execution runs in `dispatcher local`, every status change delivered.",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds (120)")
    parser.add_argument("--stack", help="only this stack's sample workflow (default: every execution)")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    endpoint_url = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint_url:
        raise CliError("AWS_ENDPOINT_URL is not set: use the exports `dispatcher local` prints")
    url = endpoint_url.rstrip("/") + SETTLED_PATH
    if args.stack:
        url += "?" + urllib.parse.urlencode({"state_machine": workflow_name(args.stack)})
    deadline = time.monotonic() + args.timeout
    while True:
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 — the emulator's own URL
            state = json.loads(answer.read())
        if state["running"] == 0 and state["undelivered"] == 0:
            out.write("settled: no execution runs, and every status change event is delivered\n")
            return 0
        if time.monotonic() >= deadline:
            out.write(f"not settled after {args.timeout:g} s: {state['running']} execution(s) still run\n")
            return 1
        time.sleep(SETTLE_POLL_SECONDS)


def gated(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """``python -m dispatcher.local gated N [--stack NAME]``: N executions of the sample gated workflow.

    Returns once each one's request is on the gate's queue (a session's next command finds them).
    """
    parser = argparse.ArgumentParser(
        prog="python -m dispatcher.local gated",
        description="Start executions of the sample gated workflow of `dispatcher local --gate`.",
    )
    parser.add_argument("count", type=int, help="how many to start")
    parser.add_argument("--stack", default="dispatcher-local", help="the emulated stack (dispatcher-local)")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="give up waiting for the requests after this long (120)"
    )
    args = parser.parse_args(argv)
    out = out or sys.stdout
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machine = next(
        (
            found["stateMachineArn"]
            for page in sfn.get_paginator("list_state_machines").paginate()
            for found in page["stateMachines"]
            if found["name"] == gated_name(args.stack)
        ),
        None,
    )
    if machine is None:
        raise CliError(f"no gated workflow in stack {args.stack}: start `dispatcher local --gate`")
    started = [
        # Named here: moto leaves an execution started without one unnamed (AWS names it).
        sfn.start_execution(stateMachineArn=machine, name=f"gated-{uuid.uuid4().hex[:12]}", input="{}")[
            "executionArn"
        ]
        for _ in range(args.count)
    ]
    deadline = time.monotonic() + args.timeout
    while not all(_asked(sfn, arn) for arn in started):
        if time.monotonic() >= deadline:
            raise CliError(f"the executions did not all reach the gate within {args.timeout:g} s")
        time.sleep(SETTLE_POLL_SECONDS)
    out.write(f"started {args.count} execution(s) of {gated_name(args.stack)}: each asked at the gate\n")
    return 0


def _asked(sfn: Any, execution_arn: str) -> bool:
    """Whether the execution's request is on the gate's queue (its `Enter gate` task was submitted)."""
    events = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return any(event["type"] == "TaskSubmitted" for event in events)


HELPERS = {"downstream": downstream, "settle": settle, "gated": gated}
USAGE = (
    "usage: python -m dispatcher.local downstream down|up [--stack NAME]"
    " | settle [--stack NAME] [--timeout S] | gated N [--stack NAME]\n"
)


def main(argv: list[str]) -> int:
    """``python -m dispatcher.local``: a helper command of the emulator (``downstream``, ``settle``)."""
    helper = HELPERS.get(argv[0]) if argv else None
    if helper is None:
        sys.stderr.write(USAGE)
        return 2
    try:
        return helper(argv[1:])
    except Exception as error:
        message: Any = getattr(error, "response", {}).get("Error", {}).get("Message") or error
        sys.stderr.write(f"error: {message} (is `dispatcher local` running, with its exports set?)\n")
        return 1
