"""`dispatcher local`: the embedded AWS emulator with a dispatcher stack, ticking like the schedule.

Everything the CLI does can be tried here without an AWS account or Docker. The stack
is a CloudFormation stack in the emulator with the outputs the real template declares,
so ``--stack`` works against it as against AWS. Local only: needs the ``local`` extra.
"""

from __future__ import annotations

import functools
import gc
import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from dispatcher.cli.errors import CliError
from dispatcher.core.effective import shown
from dispatcher.core.events import failure_pattern, is_wake, refill_pattern
from dispatcher.core.kinds import kind_of, said, said_keys
from dispatcher.core.kinds.gate import GATE
from dispatcher.core.outcomes import Outcome
from dispatcher.core.topology import DEFAULT, LANE
from dispatcher.in_process import tick_here
from dispatcher.local.account import FAKE_CREDENTIALS, local_client, pointed_at
from dispatcher.local.events import Rule, sqs_event, to_queue
from dispatcher.local.gates import create_release_queue
from dispatcher.local.members import LocalMembers, local_members
from dispatcher.local.server import emulated_server
from dispatcher.local.stack import Stack, create_stack, function_name, register_stack
from dispatcher.local.workflows import release_ended


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
    document: dict[str, Any] | None = None,
) -> int:
    """Run the emulator until interrupted; tick every ``schedule_seconds`` (0: never).

    ``lanes``: (name, priority) of more lanes into the stack's state machine and pool.
    ``gate``: gate ``gate`` on the sample gated workflow, in pool default. ``document``: a
    ``LANES`` document whose queues and state machines are created as it names them
    (`local_members`). Gates' releases and ends reach the ticks in batches, as through the
    template's end-event queue. A document that breaks a rule of ``LANES`` is a
    `ConfigurationError`, raised before the emulator says it is ready.
    """
    if port and not _port_free(port):
        raise CliError(f"port {port} is in use: pass --port with a free one")
    with emulated_server(port=port) as (endpoint_url, emulation), pointed_at(endpoint_url):
        resources = create_stack(stack, wait_seconds=wait_seconds, downstream=True, slots=True)
        members = local_members(
            resources, endpoint_url, wait_seconds=wait_seconds, lanes=lanes, gate=gate, document=document
        )
        # The template's end-event queue: gates' releases and ends, and, ticking on a
        # schedule, the lanes' ends, reach the ticks from it in batches, with their errors.
        end_events = members.release_queue_url or create_release_queue(stack)
        register_stack(
            stack,
            resources,
            max_concurrency,
            function=function_name(stack),
            lanes=members.lanes_variable,
            release_queue_url=end_events,
            # Ticking on a schedule, producers wake the ticks as deployed; with --schedule 0
            # nothing ticks by itself, so they send no wakes.
            wake_queue_url=end_events if schedule_seconds > 0 else "",
        )
        ticking = threading.Lock()  # the handler's module state serves one tick at a time
        lines = TickLines(out)

        def tick(event: dict[str, Any] | None = None) -> dict[str, Any]:
            with ticking:
                overrides = {"lanes": members.lanes_variable} if members.lanes_variable else {}
                return tick_here(resources.environment(max_concurrency, **overrides), "WARNING", event)

        emulation.functions[function_name(stack)] = tick
        if members.gated_machines:
            emulation.rules.append(
                Rule(refill_pattern(members.gated_machines), to_queue(end_events, endpoint_url))
            )
        ends = end_events if schedule_seconds > 0 else None
        emulation.rules += lane_rules(resources, members.lane_machines, endpoint_url, ends)
        threading.Thread(
            target=_deliver_batches,
            args=(end_events, endpoint_url, tick, lines, schedule_seconds > 0),
            daemon=True,
        ).start()
        banner = _banner(
            stack,
            endpoint_url,
            members,
            max_concurrency=max_concurrency,
            wait_seconds=wait_seconds,
            schedule_seconds=schedule_seconds,
        )
        out.write(banner + "\n")
        out.flush()
        # What is made by now (moto, botocore's models, the stack) lives until Ctrl-C: the
        # collector leaves it alone, in each collection and in the one at exit (1.5 s of CPU).
        gc.freeze()
        _tick_on_schedule(tick, schedule_seconds, lines)
    return 0


def lane_rules(stack: Stack, machines: Sequence[str], endpoint_url: str, ends: str | None) -> list[Rule]:
    """What the lanes' ends do, as the template's rules do: failures spooled, each end to the end-event queue.

    ``ends``: the end-event queue the ticks take batches from (None: ends don't tick, as
    with ``--schedule 0``). And, local only, the simulated downstream API ends the session
    of an execution that ended: the slot of one stopped during its wait comes back.
    """
    rules = [
        Rule(failure_pattern(machines), to_queue(stack.spool_queue_url, endpoint_url)),
        Rule(refill_pattern(machines), functools.partial(_end_session, stack.downstream_table)),
    ]
    if ends is not None:
        rules.append(Rule(refill_pattern(machines), to_queue(ends, endpoint_url)))
    return rules


def _end_session(table: str, event: dict[str, Any]) -> None:
    """An execution ended: the simulated downstream API gives back the slot it held, if any."""
    release_ended(table, event["detail"]["executionArn"])


def _banner(  # noqa: PLR0913 — what the banner says of each option
    stack: str,
    endpoint_url: str,
    members: LocalMembers,
    *,
    max_concurrency: int,
    wait_seconds: float,
    schedule_seconds: float,
) -> str:
    """What `dispatcher local` says once ready: the stack, its members, the exports, commands to try."""
    document = members.document
    lanes = document.get("lanes", [])
    gates = document.get("gates", [])
    described = [
        *(f"pool {name} ({_pool_settings(pool)})" for name, pool in document.get("pools", {}).items()),
        *(
            f"lane {lane['name']} (priority {lane.get('priority', 0)}, pool {lane.get('pool', DEFAULT)},"
            f" state machine {_name(lane['state_machine_arn'])}{_settings(lane, LANE)})"
            for lane in lanes
        ),
        *(
            f"gate {gate['name']} (pool {gate.get('pool', DEFAULT)},"
            f" guarding the section of {_name(gate['state_machine_arn'])}{_settings(gate, GATE)})"
            for gate in gates
        ),
    ]
    lines = [
        f"Emulator ready at {endpoint_url} with stack {stack!r}"
        f" (MAX {max_concurrency}, each sample execution runs {wait_seconds:g} s,"
        " then calls a simulated downstream API)" + (f"; {', '.join(described)}." if described else "."),
        "In another shell:",
        "",
        *(f"  {line}" for line in exports(endpoint_url)),
        "",
        f"  dispatcher --stack {stack} status",
        f"  dispatcher --stack {stack} enqueue '{{\"job\": 1}}' --group demo",
        *(
            f"  dispatcher --stack {stack} enqueue '{{\"job\": 2}}' --group demo --lane {lane['name']}"
            for lane in lanes[:1]
        ),
        *(
            f"  python -m dispatcher.local gated 10 --stack {stack} --gate {gate['name']}"
            for gate in gates[:1]
        ),
        f"  dispatcher --stack {stack} tick            # or tick --invoke: the emulated function",
        "  python -m dispatcher.local downstream down   # every lane's executions fail until 'up'",
        "  python -m dispatcher.local downstream capacity 3   # the 4th at once fails: Downstream.Throttled",
        f"  dispatcher --stack {stack} failed",
        *([f"  dispatcher --stack {stack} info            # every queue's URL"] if described else []),
        "",
        _schedule(stack, schedule_seconds, bool(gates)),
        "State lives in memory: queues, executions and the table are gone when this stops. Ctrl-C stops.",
    ]
    return "\n".join(lines)


def _pool_settings(pool: dict[str, Any]) -> str:
    """A pool's MAX, and whether it adapts: ``MAX 8, adaptive on Downstream.Throttled``."""
    said = [f"MAX {pool['max_concurrency']}"] if "max_concurrency" in pool else []
    adaptive = pool.get("adaptive")
    if isinstance(adaptive, dict):
        said.append(f"adaptive on {', '.join(adaptive.get('errors', []))}")
    return ", ".join(said) or "MAX_CONCURRENCY"


def _settings(entry: dict[str, Any], kind: str) -> str:
    """A member's settings in ``LANES`` (``, max_per_group 3``); `status` shows the live ones."""
    return "".join(f", {key} {shown(entry[key])}" for key in kind_of(kind).settings if key in entry)


def _name(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


def _schedule(stack: str, schedule_seconds: float, gates: bool) -> str:
    """How it ticks: on the schedule and on ends, or only when told (and on a gate's releases)."""
    if schedule_seconds > 0:
        every = f"Ticking every {schedule_seconds:g} s, whenever an execution ends"
        return f"{every} and when a job is sent (its wake), like the deployed function."
    releases = " and on a gate's releases and ends (the end-event queue's batches)" if gates else ""
    return f"Not ticking on a schedule (--schedule 0): only on `dispatcher --stack {stack} tick`{releases}."


def _deliver_batches(
    queue_url: str,
    endpoint_url: str,
    tick: Callable[[dict[str, Any]], dict[str, Any]],
    lines: TickLines,
    wakes: bool,
) -> None:
    """The end-event queue's event source mapping: its releases and ends, to a tick, ten at a time.

    As the mapping does, a batch leaves the queue once its tick returned; a batch whose tick
    failed comes back when its visibility timeout ends. Without ``wakes`` (``--schedule 0``:
    nothing ticks by itself), a wake (the sample gated workflow's) is deleted unticked, and a
    batch of wakes alone brings no tick.
    """
    sqs = local_client("sqs", endpoint_url)
    while True:
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["SentTimestamp"]
        ).get("Messages", [])
        if not messages:
            continue
        ticked = messages if wakes else [m for m in messages if not _is_wake_body(m["Body"])]
        if ticked:
            sent = [int(message["Attributes"]["SentTimestamp"]) / 1000 for message in ticked]
            event = sqs_event([message["Body"] for message in ticked], sent_at=sent)
            if lines.invoked(functools.partial(tick, event)) is None:
                continue
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(index), "ReceiptHandle": m["ReceiptHandle"]} for index, m in enumerate(messages)
            ],
        )


def _is_wake_body(body: str) -> bool:
    try:
        return is_wake(json.loads(body))
    except ValueError:
        return False


SAID = frozenset(
    {Outcome.STARTED, Outcome.REDRIVEN, Outcome.DEAD_LETTERED, Outcome.CANCELLED, Outcome.EXPIRED}
)
"""What a tick's line says (`dispatcher.core.outcomes`): what it started, admitted, dead-lettered,
cancelled or let expire."""


class TickLines:
    """The emulator's line for each tick that did something, from whichever thread ticked.

    Beside what it started (admitted, dead-lettered, cancelled, let expire), a line says an
    adaptive pool's limit when it moved since the last line: a cut is logged, growth isn't
    at the emulator's log level.
    """

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._limits: dict[str, int] = {}

    def invoked(self, tick: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """One invocation, as Lambda runs it: an error is recorded (one line) and the next invocation comes.

        A broken control parameter, say, stops every tick until it is mended, and the emulator
        goes on serving meanwhile, so that `status` shows it and the runbook's mending can be tried.
        """
        try:
            report = tick()
        except Exception as error:  # Lambda records any error, and the schedule goes on
            self._write(f"tick failed (the next one comes as scheduled): {error}")
            return None
        self.said(report)
        return report

    def said(self, report: dict[str, Any]) -> None:
        """One line for a tick that did something, or moved a pool's limit."""
        kinds = (LANE, GATE) if "gates" in report else (LANE,)
        moved = []
        with self._lock:
            for pool, figures in (report.get("pools") or {}).items():
                limit = figures.get("limit")
                before = self._limits.get(pool)
                if limit is not None and before is not None and limit != before:
                    moved.append(f"pool {pool} limit {limit} (was {before})")
                if limit is not None:
                    self._limits[pool] = limit
        if any(report.get(key) for key in said_keys(kinds, SAID)) or moved:
            self._write(
                "; ".join([f"tick: running {report['running']}, {said(report, kinds, SAID)}", *moved])
            )

    def _write(self, line: str) -> None:
        with self._lock:
            self._out.write(f"{time.strftime('%H:%M:%S')} {line}\n")
            self._out.flush()


WAKE_SECONDS = 0.5
"""The main thread never waits longer than this at once. Ctrl-C may be delivered to any
thread (moto runs each execution on threads of its own), and Python raises it in the main
thread only when that thread next runs: a main thread asleep for the schedule would miss it
until the sleep ends."""


def _tick_on_schedule(tick: Callable[[], dict[str, Any]], schedule_seconds: float, lines: TickLines) -> None:
    """Tick like the deployed function's schedule: every ``schedule_seconds`` (0: never by itself).

    Ends reach the ticks through the end-event queue (`_deliver_batches`), as deployed.
    """
    due = time.monotonic() + schedule_seconds
    while True:
        time.sleep(WAKE_SECONDS)
        if schedule_seconds > 0 and time.monotonic() >= due:
            lines.invoked(tick)
            due = time.monotonic() + schedule_seconds
