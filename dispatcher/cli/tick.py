"""`dispatcher tick`: one tick of the real handler here, or an invocation of the deployed function."""

from __future__ import annotations

import argparse
import importlib.util
import json
from typing import Any, TextIO

from dispatcher import install_hint
from dispatcher.cli.args import AddCommand
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.errors import PROG, CliError, InterruptedRunError
from dispatcher.cli.progress import StopAsked
from dispatcher.core.kinds import KINDS, said
from dispatcher.core.outcomes import Outcome

UNCOUNTED_STOPS = {
    "paused": "paused, or MAX 0",
    "busy": "another tick holds the lease and ticks again for this one",
}
"""Stops before the tick counts RUNNING, and what each means."""
FUNCTION_MODULES = ("aws_lambda_powertools", "aws_xray_sdk")
"""What running the function here needs beyond the package (the ``function`` extra)."""


STOPPED_PART_WAY = (
    "the tick stopped part-way: the jobs it held go back to their queues when their hold runs out,"
    " and nothing starts twice"
)
LEFT_RUNNING = "the function's tick goes on without this command: `status` shows what it did"


def command_tick(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """One tick here against the configured resources, or --invoke the deployed function.

    Ctrl-C lets the tick end (a tick is at most a minute) and says what it did; a second
    Ctrl-C stops it at once.
    """
    try:
        with StopAsked() as stop:
            if args.invoke:
                report = _invoke(aws, args.function_name or resources.need("dispatcher_function_name"))
            else:
                report = _tick_here(resources, args.endpoint_url, args.region, args.log_level)
    except KeyboardInterrupt:
        raise InterruptedRunError(LEFT_RUNNING if args.invoke else STOPPED_PART_WAY) from None
    print_tick(args, report, out)
    if stop.asked:
        raise InterruptedRunError("the tick above ran to its end first (a second Ctrl-C stops one at once)")
    return 0


def print_tick(args: argparse.Namespace, report: dict[str, Any], out: TextIO) -> None:
    """The tick's report: its JSON, or one line of what it counted, started, admitted and released."""
    if args.json:
        out.write(json.dumps(report) + "\n")
    elif report.get("stopped") in UNCOUNTED_STOPS:
        # Stopped before counting: its "running 0" would read as nothing running.
        out.write(
            f"stopped: {report['stopped']} ({UNCOUNTED_STOPS[report['stopped']]});"
            " nothing counted or started\n"
        )
    else:
        kinds = [kind.name for kind in KINDS if kind.primary or kind.plural in report]
        out.write(
            f"running {report.get('running')}{_per_pool(report)}, {said(report, kinds, SAID)},"
            f" stopped: {report.get('stopped', '?')}{_held(report)}\n"
        )
    out.flush()


def _per_pool(report: dict[str, Any]) -> str:
    """With pools besides default, each one's RUNNING of its MAX (the total alone reads as one pool's)."""
    pools = report.get("pools") or {}
    if len(pools) <= 1:
        return ""
    each = ", ".join(f"{name} {pool['running']} of {pool['max_concurrency']}" for name, pool in pools.items())
    return f" (pools: {each})"


def _held(report: dict[str, Any]) -> str:
    """Jobs the tick left held for their group's limit: "drained" alone would read as an empty queue."""
    held = (report.get("tenants") or {}).get("held", 0)
    return f" (jobs held for their group's limit: {held})" if held else ""


SAID = frozenset(Outcome) - {Outcome.DELETE_FAILED}
"""What the tick's line says of its messages (`dispatcher.core.outcomes`): all but failed deletes."""


def _invoke(aws: Aws, function_name: str) -> dict[str, Any]:
    response = aws.client("lambda").invoke(FunctionName=function_name, Payload=b"{}")
    payload = response["Payload"].read()
    try:
        document = json.loads(payload or b"null")
    except ValueError:
        document = None
    if response.get("FunctionError"):
        message = (
            document.get("errorMessage") if isinstance(document, dict) else payload.decode(errors="replace")
        )
        raise CliError(f"the tick failed in {function_name}: {message}")
    if not isinstance(document, dict):
        raise CliError(
            f"{function_name} returned {payload[:200].decode(errors='replace')!r}, not a tick report"
        )
    return document


def _tick_here(
    resources: Resources, endpoint_url: str | None, region: str | None, log_level: str
) -> dict[str, Any]:
    """One tick of the real handler in this process, against the configured resources."""
    missing = [module for module in FUNCTION_MODULES if importlib.util.find_spec(module) is None]
    if missing:
        raise CliError(
            f"a tick here runs the function, which needs its own dependencies ({', '.join(missing)}"
            f" missing): {install_hint('function')}; or use --invoke"
        )
    variables = {**resources.function_environment(), "POWERTOOLS_SERVICE_NAME": PROG}
    if endpoint_url:
        variables["AWS_ENDPOINT_URL"] = endpoint_url
    if region:
        variables["AWS_DEFAULT_REGION"] = variables["AWS_REGION"] = region
    # Only now: the handler imports the function's dependencies.
    from dispatcher.in_process import tick_here  # noqa: PLC0415

    return tick_here(variables, log_level)


def tick_needs(args: argparse.Namespace, _resources: Resources) -> list[str]:
    """--invoke: the function; a tick here: what the function's environment holds."""
    if args.invoke:
        return [] if args.function_name else ["dispatcher_function_name"]
    return ["queue_url", "dead_letter_queue_url", "state_machine_arn", "state_table", "max_concurrency"]


def register(command: AddCommand) -> None:
    """Add `tick`."""
    tick = command(
        "tick",
        command_tick,
        "Run one tick here against the configured resources, or invoke the deployed function.",
        "  dispatcher --stack jobs tick\n  dispatcher --stack jobs tick --invoke\n"
        "  dispatcher tick --json --log-level INFO\n",
        needs=tick_needs,
    )
    tick.add_argument(
        "--invoke", action="store_true", help="invoke the deployed function instead (a real tick)"
    )
    tick.add_argument(
        "--function-name", help="with --invoke: the function (else the stack's DispatcherFunctionName)"
    )
    tick.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the tick's logs, on stderr",
    )
