"""The `dispatcher` command: status, live control, enqueueing and ticks, for operators and producers.

It behaves like the AWS CLI: configuration from ``--stack NAME`` (the stack's outputs)
or from the function's own environment variables, ``--endpoint-url`` (or
``AWS_ENDPOINT_URL``) for an emulator, ``--json`` for scripts, exit status 0 on
success, 1 on failure and 2 on a usage error, and errors as one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.aws_errors import error_code
from dispatcher.adapters.ssm import ControlParameter
from dispatcher.control import Control, combine
from dispatcher.errors import DispatcherError
from dispatcher.planning import LIST_PAGE_SIZE
from dispatcher.producer import Job, Producer, SendResult

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient

PROG = "dispatcher"
OUTPUTS = {
    "queue_url": "JobQueueUrl",
    "dead_letter_queue_url": "DeadLetterQueueUrl",
    "state_machine_arn": "StateMachineArn",
    "state_table": "StateTableName",
    "control_parameter": "ControlParameterName",
    "function_name": "DispatcherFunctionName",
    "spool_queue_url": "SpoolQueueUrl",
}
ENVIRONMENT = {
    "queue_url": "QUEUE_URL",
    "dead_letter_queue_url": "DEAD_LETTER_QUEUE_URL",
    "state_machine_arn": "STATE_MACHINE_ARN",
    "state_table": "STATE_TABLE",
    "control_parameter": "CONTROL_PARAMETER",
    "function_name": "DISPATCHER_FUNCTION_NAME",
    "spool_queue_url": "SPOOL_QUEUE_URL",
}
# An operator waits for the answer: fewer attempts than the function's, and a short connect timeout.
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=5,
    read_timeout=30,
    user_agent_extra="dispatcher-cli",
)
TICK_TIMEOUT_SECONDS = 60.0
"""A tick run here gets the deployed function's timeout."""
LOCAL_MODULES = (
    "moto",
    "flask",
    "requests",
    "openapi_spec_validator",
    "cfnlint",
    "joserfc",
    "graphql",
    "yaml",
)
"""What `dispatcher local` needs beyond the package (the `local` extra)."""
PROGRESS_EVERY = 500
"""Without a terminal, a progress line about every this many jobs."""

EPILOG = """\
configuration:
  --stack NAME reads the stack's outputs (JobQueueUrl, StateMachineArn, ...). Without it,
  the function's own variables are read: QUEUE_URL, DEAD_LETTER_QUEUE_URL,
  STATE_MACHINE_ARN, STATE_TABLE, MAX_CONCURRENCY, CONTROL_PARAMETER, SPOOL_QUEUE_URL. Credentials and
  region come from the usual AWS places; AWS_ENDPOINT_URL or --endpoint-url points
  every call at an emulator (`dispatcher local`).

examples:
  dispatcher --stack jobs status
  dispatcher --stack jobs status --watch
  dispatcher --stack jobs pause
  dispatcher --stack jobs set-max 20
  dispatcher --stack jobs resume
  dispatcher --stack jobs enqueue '{"order": 42}' --group customer-7 --name order-42
  dispatcher --stack jobs enqueue --file jobs.jsonl
  dispatcher --stack jobs tick --invoke
  dispatcher --stack jobs failed --since 3h
  dispatcher --stack jobs rerun --redrive --error 'Api.*' --dry-run
  dispatcher --stack jobs rerun --restart --rate 5
  dispatcher --stack jobs dead-letters
  dispatcher --stack jobs redrive-dead-letters
  dispatcher local

exit status: 0 success, 1 failure, 2 usage error.
"""


class CliError(Exception):
    """A failure to report as one line (exit status 1)."""


class UsageError(CliError):
    """A usage error (exit status 2)."""


@dataclass(frozen=True)
class Resources:
    """What the commands need to know about one dispatcher deployment."""

    queue_url: str | None = None
    dead_letter_queue_url: str | None = None
    state_machine_arn: str | None = None
    state_table: str | None = None
    control_parameter: str | None = None
    function_name: str | None = None
    spool_queue_url: str | None = None
    max_concurrency: int | None = None
    source: str = "environment"

    def need(self, field_name: str) -> str:
        """The named resource, or a clear error saying where it should have come from."""
        value = getattr(self, field_name)
        if not value:
            where = (
                f"output {OUTPUTS[field_name]} of stack {self.source.removeprefix('stack ')}"
                if self.source.startswith("stack ")
                else f"environment variable {ENVIRONMENT[field_name]} (or use --stack NAME)"
            )
            raise CliError(f"no {field_name.replace('_', ' ')}: set {where}")
        return str(value)

    def environment_max(self) -> int:
        """MAX_CONCURRENCY (or the stack's MaxConcurrency), which the control parameter may override."""
        if self.max_concurrency is None:
            where = (
                f"parameter MaxConcurrency of stack {self.source.removeprefix('stack ')}"
                if self.source.startswith("stack ")
                else "environment variable MAX_CONCURRENCY (or use --stack NAME)"
            )
            raise CliError(f"no max concurrency: set {where}")
        return self.max_concurrency

    def function_environment(self) -> dict[str, str]:
        """The dispatcher function's environment for a local tick."""
        variables = {
            "QUEUE_URL": self.need("queue_url"),
            "DEAD_LETTER_QUEUE_URL": self.need("dead_letter_queue_url"),
            "STATE_MACHINE_ARN": self.need("state_machine_arn"),
            "STATE_TABLE": self.need("state_table"),
            "MAX_CONCURRENCY": str(self.environment_max()),
        }
        if self.control_parameter:
            variables["CONTROL_PARAMETER"] = self.control_parameter
        return variables


class Aws:
    """boto3 clients for the CLI, built on first use, honouring --region and --endpoint-url."""

    def __init__(self, region: str | None, endpoint_url: str | None) -> None:
        self._session = boto3.session.Session(region_name=region)
        self._endpoint_url = endpoint_url
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        """A client for ``service`` (cached)."""
        if service not in self._clients:
            self._clients[service] = self._session.client(
                service,  # type: ignore[call-overload]  # any service name the CLI uses
                endpoint_url=self._endpoint_url,
                config=CLIENT_CONFIG,
            )
        return self._clients[service]


def resources_from_stack(cloudformation: CloudFormationClient, stack: str) -> Resources:
    """Read a deployed stack's outputs (and its MaxConcurrency parameter)."""
    try:
        [description] = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if error_code(error) == "ValidationError":
            raise CliError(
                f"stack {stack} not found: {error.response['Error'].get('Message', '')}"
            ) from error
        raise
    outputs = {output["OutputKey"]: output["OutputValue"] for output in description.get("Outputs", [])}
    parameters = {
        item["ParameterKey"]: item.get("ParameterValue") for item in description.get("Parameters", [])
    }
    max_parameter = parameters.get("MaxConcurrency")
    return Resources(
        **{name: outputs.get(output) for name, output in OUTPUTS.items()},
        max_concurrency=int(max_parameter) if max_parameter and max_parameter.isdigit() else None,
        source=f"stack {stack}",
    )


def resources_from_environment(environ: dict[str, str]) -> Resources:
    """Read the function's own variables."""
    raw_max = environ.get("MAX_CONCURRENCY")
    if raw_max is not None and not raw_max.strip().isdigit():
        raise CliError(f"MAX_CONCURRENCY must be an integer >= 0, not {raw_max!r}")
    found = {name: environ.get(variable) or None for name, variable in ENVIRONMENT.items()}
    return Resources(**found, max_concurrency=None if raw_max is None else int(raw_max))  # type: ignore[arg-type]


# -- status -------------------------------------------------------------------------


@dataclass(frozen=True)
class Status:
    """How one lane stands right now."""

    lane: str
    max_concurrency: int
    paused: bool
    running: int
    free: int
    queued: int
    in_flight: int
    dead_letters: int
    oldest_running_seconds: float | None
    max_from: str


def read_status(aws: Aws, resources: Resources, now: float) -> Status:
    """Read MAX and pause, RUNNING, the queues' depths and the oldest RUNNING execution."""
    control = _control(aws, resources)
    read = None if control is None else control.read(fresh=True)
    if read is None or read.max_concurrency is None:
        environment_max = resources.environment_max()
    else:
        environment_max = resources.max_concurrency or 0  # overridden by the parameter
    limits = combine(environment_max, read, resources.control_parameter)
    running, oldest = _running(aws, resources.need("state_machine_arn"))
    queued, in_flight = _depth(aws, resources.need("queue_url"))
    dead_letters = sum(_depth(aws, resources.need("dead_letter_queue_url")))
    return Status(
        lane="default",
        max_concurrency=limits.max_concurrency,
        paused=limits.halted,
        running=running,
        free=0 if limits.halted else max(0, limits.max_concurrency - running),
        queued=queued,
        in_flight=in_flight,
        dead_letters=dead_letters,
        oldest_running_seconds=None if oldest is None else round(max(0.0, now - oldest), 1),
        max_from=limits.source,
    )


def _running(aws: Aws, state_machine_arn: str) -> tuple[int, float | None]:
    paginator = aws.client("stepfunctions").get_paginator("list_executions")
    count, oldest = 0, None
    pages = paginator.paginate(
        stateMachineArn=state_machine_arn,
        statusFilter="RUNNING",
        PaginationConfig={"PageSize": LIST_PAGE_SIZE},
    )
    for page in pages:
        for execution in page["executions"]:
            count += 1
            started = execution["startDate"].timestamp()
            oldest = started if oldest is None else min(oldest, started)
    return count, oldest


def _depth(aws: Aws, queue_url: str) -> tuple[int, int]:
    attributes = aws.client("sqs").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def status_table(status: Status) -> str:
    """The status as an aligned table, one row per lane."""
    headers = [
        "LANE",
        "MAX",
        "PAUSED",
        "RUNNING",
        "FREE",
        "QUEUED",
        "IN FLIGHT",
        "DEAD LETTERS",
        "OLDEST RUNNING",
    ]
    row = [
        status.lane,
        str(status.max_concurrency),
        "yes" if status.paused else "no",
        str(status.running),
        str(status.free),
        str(status.queued),
        str(status.in_flight),
        str(status.dead_letters),
        _age(status.oldest_running_seconds),
    ]
    widths = [max(len(header), len(cell)) for header, cell in zip(headers, row, strict=True)]
    lines = [
        "  ".join(
            cell.ljust(width) if index == 0 else cell.rjust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )
        for cells in (headers, row)
    ]
    return "\n".join(line.rstrip() for line in lines)


def command_status(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Print the status once, or every --watch seconds until interrupted (or --count times)."""
    shown = 0
    while True:
        status = read_status(aws, resources, time.time())
        if args.json:
            out.write(json.dumps(asdict(status)) + "\n")
        else:
            if args.watch is not None and out.isatty():
                out.write("\x1b[H\x1b[2J")
            if args.watch is not None:
                out.write(time.strftime("%H:%M:%S") + f"  every {args.watch:g}s, Ctrl-C to stop\n")
            out.write(status_table(status) + "\n")
        out.flush()
        shown += 1
        if args.watch is None or (args.count is not None and shown >= args.count):
            return 0
        time.sleep(args.watch)


# -- control ------------------------------------------------------------------------


def _control(aws: Aws, resources: Resources) -> ControlParameter | None:
    if not resources.control_parameter:
        return None
    return ControlParameter(resources.control_parameter, client=aws.client("ssm"))


def _change_control(
    aws: Aws, resources: Resources, change: Callable[[Control], Control]
) -> tuple[str, Control]:
    """Read, modify, write the control parameter: only the changed key moves."""
    control = _control(aws, resources)
    if control is None:
        raise CliError(
            "no control parameter: set CONTROL_PARAMETER or use --stack NAME"
            " (a stack deployed with the ControlParameter resource)"
        )
    # A parameter that doesn't exist yet is created with the changed key alone: the
    # environment's MAX keeps applying until someone sets one.
    updated = change(control.read(fresh=True) or Control())
    control.write(updated)
    return control.name, updated


def _report_control(args: argparse.Namespace, name: str, control: Control, out: TextIO) -> int:
    if args.json:
        out.write(json.dumps({"parameter": name, **control.model_dump(exclude_none=True)}) + "\n")
        return 0
    state = "paused" if control.paused else "running"
    limit = (
        "MAX from the environment" if control.max_concurrency is None else f"MAX {control.max_concurrency}"
    )
    out.write(f"{state}, {limit} (parameter {name}; ticks see it within 5 s)\n")
    return 0


def command_pause(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Pause: nothing starts, nothing is lost."""
    name, control = _change_control(
        aws, resources, lambda current: current.model_copy(update={"paused": True})
    )
    return _report_control(args, name, control, out)


def command_resume(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Resume after a pause."""
    name, control = _change_control(
        aws, resources, lambda current: current.model_copy(update={"paused": False})
    )
    return _report_control(args, name, control, out)


def command_set_max(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Change MAX without a deploy (a paused dispatcher stays paused)."""
    name, control = _change_control(
        aws, resources, lambda current: current.model_copy(update={"max_concurrency": args.max})
    )
    return _report_control(args, name, control, out)


# -- enqueue ------------------------------------------------------------------------


def _jobs_from_lines(lines: Iterator[str], source: str, default_group: str | None) -> Iterator[Job]:
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
            jobs = list(_jobs_from_lines(iter(stream), args.file, args.group))
    else:
        if args.body is None:
            raise UsageError("give the job's input as BODY (or - to read it from standard input), or --file")
        if args.group is None:
            raise UsageError("--group is required for one job (the SQS FIFO MessageGroupId)")
        body = sys.stdin.read() if args.body == "-" else args.body
        jobs = [Job(body, args.group, args.name)]
    progress = _progress(len(jobs)) if len(jobs) > 1 and not args.json else None
    result = producer.send_batch(jobs, progress=progress)
    return _report_sent(args, result, out)


def _open(path: str) -> TextIO:
    try:
        return open(path, encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}") from error


def _progress(total: int) -> Callable[[SendResult], None]:
    shown = {"step": 0}

    def show(result: SendResult) -> None:
        done = len(result.sent) + len(result.failed)
        line = f"sent {len(result.sent):,}/{total:,}, failed {len(result.failed):,}"
        if sys.stderr.isatty():
            sys.stderr.write(f"\r{line}" + ("\n" if done == total else ""))
        elif done == total or done // PROGRESS_EVERY > shown["step"]:
            sys.stderr.write(line + "\n")
        shown["step"] = done // PROGRESS_EVERY
        sys.stderr.flush()

    return show


def _report_sent(args: argparse.Namespace, result: SendResult, out: TextIO) -> int:
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


# -- tick ---------------------------------------------------------------------------


def command_tick(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """One tick here against the configured resources, or --invoke the deployed function."""
    if args.invoke:
        report = _invoke(aws, args.function_name or resources.need("function_name"))
    else:
        report = _tick_here(resources, args.endpoint_url, args.region, args.log_level)
    if args.json:
        out.write(json.dumps(report) + "\n")
    else:
        out.write(
            f"running {report.get('running')}, started {report.get('started')}"
            + (f" ({report['redriven']} redriven)" if report.get("redriven") else "")
            + ","
            f" already started {report.get('already_started', 0)},"
            f" dead-lettered {report.get('dead_lettered')},"
            f" released {report.get('released', 0)}, stopped: {report.get('stopped', '?')}\n"
        )
    return 0


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
    variables = {**resources.function_environment(), "POWERTOOLS_SERVICE_NAME": PROG}
    if endpoint_url:
        variables["AWS_ENDPOINT_URL"] = endpoint_url
    if region:
        variables["AWS_DEFAULT_REGION"] = variables["AWS_REGION"] = region
    return tick_here(variables, log_level)


def tick_here(variables: dict[str, str], log_level: str) -> dict[str, Any]:
    """Run one tick of the real handler in this process: its environment set, logs on stderr, metrics off."""
    os.environ.update({**variables, "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": log_level})
    from dispatcher import handler  # noqa: PLC0415 — imported once the environment is set
    from dispatcher.emulator import LocalContext  # noqa: PLC0415 — the context a local tick runs with
    from dispatcher.telemetry import logger, metrics  # noqa: PLC0415

    for log_handler in logger.handlers:
        if hasattr(log_handler, "setStream"):
            log_handler.setStream(sys.stderr)
    logger.setLevel(log_level)
    report = dict(handler.lambda_handler({}, LocalContext(TICK_TIMEOUT_SECONDS)))
    # Disabled metrics still pile up in Powertools (and print once there are 100).
    metrics.clear_metrics()
    return report


# -- local --------------------------------------------------------------------------


def command_local(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Start the embedded emulator with a stack; print what to export; serve until interrupted."""
    missing = [module for module in LOCAL_MODULES if importlib.util.find_spec(module) is None]
    if missing:
        raise CliError(
            "`dispatcher local` needs the emulator:"
            f" pip install 'dispatcher[local]' ({', '.join(missing)} missing)"
        )
    from dispatcher import local  # noqa: PLC0415 — local only

    return local.serve(
        port=args.port,
        stack=args.stack_name,
        max_concurrency=args.max,
        wait_seconds=args.wait_seconds,
        schedule_seconds=args.schedule,
        out=out,
    )


# -- arguments ----------------------------------------------------------------------


def _max(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"MAX must be an integer >= 0, not {text!r}")
    return int(text)


def positive(text: str, what: str, bound: str) -> float:
    """An argument that must be a number above 0 (``what`` names it in errors, ``bound`` says the rule)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(bound)
    return value


def _seconds(text: str) -> float:
    return positive(text, "a number of seconds", "seconds must be > 0")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    """The command line, with every command's help and examples."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--stack", default=argparse.SUPPRESS, help="read the resources from this stack's outputs"
    )
    common.add_argument(
        "--region", default=argparse.SUPPRESS, help="AWS region (else the usual AWS configuration)"
    )
    common.add_argument(
        "--endpoint-url",
        default=argparse.SUPPRESS,
        help="send every AWS call here (an emulator); else AWS_ENDPOINT_URL",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )

    root = _Parser(
        prog=PROG,
        description="Operate a dispatcher: a hard concurrency cap in front of AWS Step Functions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    commands = root.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def command(
        name: str, handler: Callable[..., int], summary: str, examples: str
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog="examples:\n" + examples,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[common],
        )
        sub.set_defaults(handler=handler)
        return sub

    status = command(
        "status",
        command_status,
        "MAX, paused, RUNNING, free, queued, in flight, dead letters and the oldest RUNNING execution.",
        "  dispatcher --stack jobs status\n"
        "  dispatcher status --json\n"
        "  dispatcher --stack jobs status --watch 5\n",
    )
    status.add_argument(
        "--watch", nargs="?", const=2.0, type=_seconds, metavar="SECONDS", help="refresh every SECONDS (2)"
    )
    status.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N refreshes")

    command(
        "pause",
        command_pause,
        "Pause: ticks start nothing and every job stays queued (the control parameter's paused key).",
        "  dispatcher --stack jobs pause\n",
    )
    command(
        "resume",
        command_resume,
        "Resume after a pause (MAX is unchanged).",
        "  dispatcher --stack jobs resume\n",
    )
    set_max = command(
        "set-max",
        command_set_max,
        "Change MAX without a deploy (the control parameter's max_concurrency key; a pause stays).",
        "  dispatcher --stack jobs set-max 20\n  dispatcher set-max 0   # same as a pause\n",
    )
    set_max.add_argument("max", type=_max, metavar="N", help="RUNNING executions allowed (integer >= 0)")

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

    tick = command(
        "tick",
        command_tick,
        "Run one tick here against the configured resources, or invoke the deployed function.",
        "  dispatcher --stack jobs tick\n  dispatcher --stack jobs tick --invoke\n"
        "  dispatcher tick --json --log-level INFO\n",
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

    local = command(
        "local",
        command_local,
        "Start the embedded AWS emulator with a dispatcher stack, and print what to export to use it.",
        "  dispatcher local                       # then, in another shell, the printed exports\n"
        "  dispatcher local --port 4567 --max 3 --schedule 10\n",
    )
    local.add_argument("--port", type=int, default=4567, help="emulator port on 127.0.0.1 (4567)")
    local.add_argument(
        "--stack-name", default="dispatcher-local", help="the emulated stack's name (dispatcher-local)"
    )
    local.add_argument("--max", type=_max, default=5, help="MAX of the emulated stack (5)")
    local.add_argument("--wait-seconds", type=int, default=5, help="how long each sample execution runs (5)")
    local.add_argument(
        "--schedule",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="tick every SECONDS, like the schedule (10; 0: never)",
    )
    from dispatcher import rerun_commands  # noqa: PLC0415 — it builds on this module

    rerun_commands.register(command)
    return root


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one command; its exit status."""
    out = out or sys.stdout
    args = parser().parse_args(argv)
    for name, default in (("stack", None), ("region", None), ("endpoint_url", None), ("json", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    try:
        aws = Aws(args.region, args.endpoint_url)
        if args.command == "local":
            resources = Resources()
        elif args.stack:
            resources = resources_from_stack(aws.client("cloudformation"), args.stack)
        else:
            resources = resources_from_environment(dict(os.environ))
        return int(args.handler(args, aws, resources, out))
    except UsageError as error:
        return _fail(str(error), 2)
    except (CliError, DispatcherError) as error:
        return _fail(str(error), 1)
    except ClientError as error:
        return _fail(
            f"{error.operation_name} failed: {error_code(error)}:"
            f" {error.response.get('Error', {}).get('Message', '')}",
            1,
        )
    except BotoCoreError as error:
        return _fail(str(error), 1)
    except KeyboardInterrupt:
        return 130


def _fail(message: str, status: int) -> int:
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
