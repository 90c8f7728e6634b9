"""``python -m dispatcher.local downstream|settle|gated``: the helper commands of `dispatcher local`.

Each talks to a running emulator through the exports it prints (``AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Sequence
from typing import Any, TextIO

import boto3
from botocore.exceptions import ClientError

from dispatcher.cli.errors import INTERRUPTED, CliError, InterruptedRunError
from dispatcher.local.account import REGION
from dispatcher.local.emulation import SETTLED_PATH
from dispatcher.local.gates import GATE
from dispatcher.local.stack import workflow_name
from dispatcher.local.workflows import THROTTLED_ERROR, keepers, set_capacity, set_downstream
from dispatcher.settings import LANES_OUTPUT


def _capacity(text: str) -> int | None:
    """``N`` (an integer >= 1), or ``none``."""
    if text == "none":
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: an integer of 1 or more, or none")
    return int(text)


def downstream(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """``python -m dispatcher.local downstream down|up|capacity N [--stack NAME]``: the simulated API."""
    parser = argparse.ArgumentParser(
        prog="python -m dispatcher.local downstream",
        description="Bring the simulated downstream API of `dispatcher local` down, or back up; or give it"
        " a capacity: an execution that finds N others using it fails at once with Downstream.Throttled"
        " (`capacity none`: no capacity again). An adaptive pool learns it (docs/adaptive.md).",
    )
    parser.add_argument("state", choices=["down", "up", "capacity"])
    parser.add_argument("capacity", nargs="?", type=_capacity, metavar="N", help="with capacity: N, or none")
    parser.add_argument("--stack", default="dispatcher-local", help="the emulated stack (dispatcher-local)")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    if args.state == "capacity":
        table = f"{args.stack}-downstream"
        lost = set_capacity(table, args.capacity)
        using = f"{len(keepers(table))} in use now"
        if args.capacity is None:
            out.write(f"downstream API capacity none: nothing is throttled ({using})\n")
        else:
            out.write(
                f"downstream API capacity {args.capacity} at once ({using});"
                f" above it executions fail with {THROTTLED_ERROR}\n"
            )
        if lost:
            out.write(f"gave back {len(lost)} slot(s) held by executions no longer running\n")
        return 0
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
    """``python -m dispatcher.local gated N [--stack NAME] [--gate NAME]``: N executions of a gated workflow.

    The gate's state machine is the one the stack's ``LANES`` names for it (``dispatcher local
    --gate`` or ``--lanes``). Returns once each one's request is on the gate's queue (a
    session's next command finds them). Ctrl-C says how many were started.
    """
    parser = argparse.ArgumentParser(
        prog="python -m dispatcher.local gated",
        description="Start executions of a gate's gated workflow in `dispatcher local`.",
    )
    parser.add_argument("count", type=int, help="how many to start")
    parser.add_argument("--stack", default="dispatcher-local", help="the emulated stack (dispatcher-local)")
    parser.add_argument("--gate", default=GATE, help=f"the gate whose workflow to start ({GATE})")
    parser.add_argument(
        "--group",
        help="the requests' message group (the input's group: try a gate's max_per_group);"
        " else each its own (the execution's name)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="give up waiting for the requests after this long (120)"
    )
    args = parser.parse_args(argv)
    out = out or sys.stdout
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machine = _gated_machine(args.stack, args.gate)
    started: list[str] = []
    given = "{}" if args.group is None else json.dumps({"group": args.group})
    try:
        for _ in range(args.count):
            # Named here: moto leaves an execution started without one unnamed (AWS names it).
            name = f"gated-{uuid.uuid4().hex[:12]}"
            started.append(
                sfn.start_execution(stateMachineArn=machine, name=name, input=given)["executionArn"]
            )
        deadline = time.monotonic() + args.timeout
        while not all(_asked(sfn, arn) for arn in started):
            if time.monotonic() >= deadline:
                raise CliError(f"the executions did not all reach the gate within {args.timeout:g} s")
            time.sleep(SETTLE_POLL_SECONDS)
    except KeyboardInterrupt:
        raise InterruptedRunError(
            f"{len(started)} of {args.count} execution(s) of {machine.rsplit(':', 1)[-1]} started;"
            " they run on, and ask at the gate"
        ) from None
    group = "" if args.group is None else f" in group {args.group}"
    out.write(
        f"started {args.count} execution(s) of {machine.rsplit(':', 1)[-1]}{group}: each asked at the gate\n"
    )
    return 0


def _gated_machine(stack: str, gate: str) -> str:
    """The state machine whose section ``gate`` guards, as the stack's ``LANES`` says."""
    try:
        outputs = (
            boto3.client("cloudformation", region_name=REGION)
            .describe_stacks(StackName=stack)["Stacks"][0]
            .get("Outputs", [])
        )
    except ClientError:
        raise CliError(f"no stack {stack}: is `dispatcher local` running, with --stack {stack}?") from None
    lanes = next((item["OutputValue"] for item in outputs if item["OutputKey"] == LANES_OUTPUT), "{}")
    gates = {entry["name"]: entry["state_machine_arn"] for entry in json.loads(lanes).get("gates", [])}
    if gate not in gates:
        listed = ", ".join(gates) or "none: start `dispatcher local --gate` or with --lanes"
        raise CliError(f"no gate {gate} in stack {stack} (gates: {listed})")
    return str(gates[gate])


def _asked(sfn: Any, execution_arn: str) -> bool:
    """Whether the execution's request is on the gate's queue (its `Enter gate` task was submitted)."""
    events = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return any(event["type"] == "TaskSubmitted" for event in events)


HELPERS = {"downstream": downstream, "settle": settle, "gated": gated}
USAGE = (
    "usage: python -m dispatcher.local downstream down|up|capacity N [--stack NAME]"
    " | settle [--stack NAME] [--timeout S] | gated N [--stack NAME] [--gate NAME] [--group G]\n"
)


def main(argv: list[str]) -> int:
    """``python -m dispatcher.local``: a helper command of the emulator (``downstream``, ``settle``)."""
    helper = HELPERS.get(argv[0]) if argv else None
    if helper is None:
        sys.stderr.write(USAGE)
        return 2
    try:
        return helper(argv[1:])
    except InterruptedRunError as error:
        sys.stderr.write(f"interrupted: {error}\n")
        return INTERRUPTED
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return INTERRUPTED
    except Exception as error:
        message: Any = getattr(error, "response", {}).get("Error", {}).get("Message") or error
        sys.stderr.write(f"error: {message} (is `dispatcher local` running, with its exports set?)\n")
        return 1
