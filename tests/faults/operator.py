"""The operator's side: `dispatcher rerun` run in-process against the faulty emulator, and killed mid-way.

The CLI builds its own boto3 session (not the default one the dispatcher's ticks use),
so its calls are hooked here: at the planned step a hook raises `Crash`, and every
later call of that run raises it too, so none of the CLI's cleanup (giving back the
spool messages it holds) reaches AWS, as when the process is killed. The messages it
held then reappear when their hold would have run out (`expire_holds`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dispatcher import cli
from dispatcher.adapters import queue_reading
from dispatcher.cli.config import Aws
from dispatcher.core.overrides import Override
from dispatcher.local.account import ACCOUNT_ID, REGION
from tests.faults.lanes import steer
from tests.support.crashes import Crash, CrashPlan

RERUN_CRASH_POINTS = (
    ("sqs.ReceiveMessage", "after"),
    ("states.DescribeExecution", "after"),
    ("dynamodb.PutItem", "after"),
    ("sqs.SendMessageBatch", "before"),
    ("sqs.SendMessageBatch", "after"),
    ("sqs.DeleteMessageBatch", "before"),
    ("sqs.DeleteMessageBatch", "after"),
)
"""Where `rerun` can die: while reading the spool, while planning, once a failure is claimed
for its mode (no job queued yet), around queueing a job (after: the job is queued, its
spool message not yet deleted), around the spool delete."""


@dataclass
class RerunResult:
    """What one `rerun` queued (from its --json report), or that it crashed."""

    crashed: bool = False
    exit_status: int | None = None
    queued: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def _hooked(crash: CrashPlan | None, sent: list[dict[str, Any]]) -> Iterator[None]:
    """Hook every client the CLI builds: note the jobs it sends, and die as planned."""
    real_client = Aws.client
    state = {"dead": False, "seen": {}}

    def before(event_name: str, params: dict[str, Any], **_: Any) -> None:
        operation = _operation(event_name)
        if state["dead"]:
            raise Crash(f"{operation} after the operator's process died")
        seen: dict[str, int] = state["seen"]  # type: ignore[assignment]
        seen[operation] = seen.get(operation, 0) + 1
        if operation == "sqs.SendMessageBatch":
            sent.extend({**entry, "QueueUrl": params["QueueUrl"]} for entry in params.get("Entries", []))
        _maybe_crash(operation, "before", seen[operation])

    def after(event_name: str, **_: Any) -> None:
        operation = _operation(event_name)
        seen: dict[str, int] = state["seen"]  # type: ignore[assignment]
        _maybe_crash(operation, "after", seen.get(operation, 0))

    def _maybe_crash(operation: str, when: str, nth: int) -> None:
        if crash and (crash.operation, crash.when, crash.nth) == (operation, when, nth):
            state["dead"] = True
            raise Crash(str(crash))

    def client(self: Aws, service: str) -> Any:
        made = real_client(self, service)
        if not getattr(made, "_operator_hooked", False):
            made.meta.events.register("provide-client-params", before)
            made.meta.events.register("after-call", after)
            made._operator_hooked = True
        return made

    Aws.client = client  # type: ignore[method-assign]
    # moto answers an empty receive at once: the long poll that guards AWS's sampling only costs time here.
    saved_wait, queue_reading.READ_WAIT_SECONDS = queue_reading.READ_WAIT_SECONDS, 0
    try:
        yield
    finally:
        Aws.client = real_client  # type: ignore[method-assign]
        queue_reading.READ_WAIT_SECONDS = saved_wait


def _operation(event_name: str) -> str:
    # "provide-client-params.sqs.SendMessageBatch" / "after-call.sqs.SendMessageBatch"
    _, service, operation = event_name.split(".", 2)
    return f"{'states' if service == 'sfn' else service}.{operation}"


def run_rerun(mode: str, crash: CrashPlan | None = None) -> tuple[RerunResult, list[dict[str, Any]]]:
    """`dispatcher rerun --MODE --json` in the function's environment: its report, and what it sent."""
    sent: list[dict[str, Any]] = []
    out = io.StringIO()
    result = RerunResult()
    with _hooked(crash, sent):
        try:
            result.exit_status = cli.main(["rerun", f"--{mode}", "--json"], out=out)
        except Crash:
            result.crashed = True
            return result, sent
    report = out.getvalue()
    # A run that failed (AWS still failing after retries) says so in one line on stderr.
    document = json.loads(report) if report else {}
    result.queued = document.get("queued", [])
    result.skipped = document.get("skipped", [])
    return result, sent


STALE_MEMBER = "retired"
"""The member a stale key names: removed from ``LANES`` while the parameter still steered it."""


def leave_stale_key(ssm: Any, parameter: str, kind: str) -> None:
    """The operator paused (or set to MAX 0) a member later removed from ``LANES``: its key stays.

    ``ssm``: the operator's own client (read, modify, write, as the CLI does).
    """
    override = Override(max_concurrency=0) if kind == "pools" else Override(paused=True)
    steer(ssm, parameter, lambda current: {kind: {**getattr(current, kind), STALE_MEMBER: override}})


def forget_stale_key(kind: str) -> tuple[int, str]:
    """`dispatcher forget --KIND retired --json` in the function's environment: its exit status and output."""
    out = io.StringIO()
    status = cli.main(["forget", f"--{kind.removesuffix('s')}", STALE_MEMBER, "--json"], out=out)
    return status, out.getvalue()


def expire_holds(queue_url: str) -> None:
    """Every message a dead reader held is visible again (its hold ran out)."""
    from moto.sqs.models import sqs_backends  # noqa: PLC0415 — same process as the server

    queue = sqs_backends[ACCOUNT_ID][REGION].get_queue(queue_url.rsplit("/", 1)[-1])
    for message in queue._messages:
        message.change_visibility(0)
        message.visible_at = 0
    queue.pending_messages.clear()
