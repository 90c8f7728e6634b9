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
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from dispatcher.cli.errors import CliError
from dispatcher.core.events import failure_pattern, refill_pattern
from dispatcher.in_process import tick_here
from dispatcher.local.account import FAKE_CREDENTIALS, pointed_at
from dispatcher.local.emulation import SETTLED_PATH
from dispatcher.local.events import Rule, to_queue
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
) -> int:
    """Run the emulator until interrupted; tick every ``schedule_seconds`` (0: never).

    ``lanes``: (name, priority) of more lanes into the stack's state machine and pool.
    """
    if port and not _port_free(port):
        raise CliError(f"port {port} is in use: pass --port with a free one")
    with emulated_server(port=port) as (endpoint_url, emulation), pointed_at(endpoint_url):
        resources = create_stack(stack, wait_seconds=wait_seconds, downstream=True)
        documents = [
            create_lane(stack, name, state_machine_arn=resources.state_machine_arn, priority=priority)
            for name, priority in lanes
        ]
        lanes_variable = json.dumps({"lanes": documents}) if documents else ""
        register_stack(stack, resources, max_concurrency, function_name(stack), lanes=lanes_variable)
        ended = threading.Event()
        ticking = threading.Lock()  # the handler's module state serves one tick at a time

        def tick(_event: object = None) -> dict[str, Any]:
            with ticking:
                overrides = {"lanes": lanes_variable} if lanes_variable else {}
                return tick_here(resources.environment(max_concurrency, **overrides), "WARNING")

        emulation.functions[function_name(stack)] = tick
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


def _tick_on_schedule(
    tick: Callable[[], dict[str, Any]], schedule_seconds: float, ended: threading.Event, out: TextIO
) -> None:
    """Tick like the deployed function: every ``schedule_seconds``, and when an execution ends."""
    while True:
        if schedule_seconds <= 0:  # never by itself: only the ticks run with `dispatcher tick`
            time.sleep(3600.0)
            continue
        ended.wait(schedule_seconds)
        ended.clear()
        report = tick()
        if report.get("started") or report.get("dead_lettered"):
            out.write(
                f"{time.strftime('%H:%M:%S')} tick: running {report['running']},"
                f" started {report['started']}"
                + (f" ({report['redriven']} redriven)" if report.get("redriven") else "")
                + f", dead-lettered {report['dead_lettered']}\n"
            )
            out.flush()


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


HELPERS = {"downstream": downstream, "settle": settle}
USAGE = (
    "usage: python -m dispatcher.local downstream down|up [--stack NAME]"
    " | settle [--stack NAME] [--timeout S]\n"
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
