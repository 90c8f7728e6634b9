"""Step Functions in memory, over a `World`: its quotas, name idempotency, and the lag of its reads.

Executions live in the `World`, which knows when each truly started and ended and what
an eventually consistent `ListExecutions` or `DescribeExecution` shows at any moment.
Here are the API's answers: `StartExecution` with the same name and input as a RUNNING
execution returns it again, any other existing name is `ExecutionAlreadyExists`;
`RedriveExecution` is the project's one emulation (`dispatcher.local.redrive`); every
call takes a token from its API's bucket (AWS's quotas for the region).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from dispatcher.core.counting import LIST_PAGE_SIZE, RunningListing, counted_names
from dispatcher.core.errors import ExecutionExistsError, RejectedInputError, TokenRefusedError, TransientError
from dispatcher.core.executions import (
    MAX_INPUT_BYTES,
    ExecutionState,
    execution_arn,
    name_problem,
    same_input,
    state_machine_of,
)
from dispatcher.core.quotas import step_functions
from tests.support.runs import Execution
from tests.support.sim.api import Client, LiveBucket
from tests.support.sim.scheduler import Scheduler
from tests.support.world import World

Result = TypeVar("Result")


class StepFunctions:
    """The service: its buckets for one region, and the world its executions live in."""

    def __init__(
        self, scheduler: Scheduler, world: World, region: str, on_run: Callable[[Execution], None]
    ) -> None:
        """``on_run``: told of every run that starts (a start or a redrive), to end it on time."""
        self.world = world
        self.region = region
        self._scheduler = scheduler
        self._on_run = on_run
        self.unlisted: dict[str, float] = {}
        """ARN → when a listing the dispatcher read first left it out, of each unreported end."""
        self.watch_unreported = False
        """Whether to fill `unlisted` (a benchmark's measure; each listing looks at every lost end)."""
        self._buckets = {
            operation: LiveBucket.of(bucket, scheduler.now)
            for operation, bucket in step_functions(region).items()
        }

    def admit(self, operation: str) -> bool:
        """Whether a call of ``operation`` is within its quota now."""
        return self._buckets[operation].take(self._scheduler.now) > 0

    def note_unlisted(
        self, machine: str, listed: Mapping[str, float | None], complete: bool, oldest: float | None
    ) -> None:
        """A listing the dispatcher read: when it first left out an execution whose end went unreported.

        It leaves one out when its pages reach back to its start and don't show it: from
        then on that listing counts it no more (`unlisted`: ARN → the moment).
        """
        if not self.watch_unreported:
            return
        for arn in self.world.unreported:
            if arn in self.unlisted or state_machine_of(arn) != machine:
                continue
            execution = self.world.executions[arn]
            reaches = complete or (oldest is not None and oldest <= execution.runs[-1].started_at)
            if reaches and execution.name not in listed:
                self.unlisted[arn] = self._scheduler.now

    def run_started(self, execution: Execution) -> None:
        """A run began (by a start or a redrive)."""
        self._on_run(execution)


class ExecutionsView:
    """The `Executions` port on one container's clients (the start client has its own attempts)."""

    def __init__(self, service: StepFunctions, arn: str, client: Client, start_client: Client) -> None:
        self._service = service
        self._world = service.world
        self._arn = arn
        self._client = client
        self._start_client = start_client

    @property
    def arn(self) -> str:
        """The state machine's ARN."""
        return self._arn

    def _call(
        self, operation: str, action: str, effect: Callable[[], Result], *, start: bool = False
    ) -> Result:
        client = self._start_client if start else self._client
        return client.call(operation, action, lambda: self._service.admit(operation), effect)

    def ensure_standard(self) -> None:
        """`DescribeStateMachine`: it is STANDARD."""
        self._call("DescribeStateMachine", f"DescribeStateMachine({self._arn})", lambda: None)

    def list_running(
        self, max_concurrency: int | None, ends: Mapping[str, float], listed_at: float
    ) -> RunningListing:
        """`ListExecutions(RUNNING)`, 1,000 a page, each read when asked for; paged as the adapter pages.

        A page's token is where the previous page ended (newest first, by start): an
        execution that ends between two pages moves nothing, as with AWS's ``nextToken``.
        (Paged by offset, the executions after it would move up one, and one would be
        skipped: a RUNNING execution left out of a whole listing.)
        """
        executions: dict[str, float | None] = {}
        oldest: float | None = None
        token: int | None = None
        while True:

            def page(token: int | None = token) -> tuple[list[tuple[Execution, float | None]], bool]:
                listed = self._world.listed_running(self._arn)
                if token is not None:
                    listed = [item for item in listed if item[0].sequence < token]
                return listed[:LIST_PAGE_SIZE], len(listed) <= LIST_PAGE_SIZE

            items, complete = self._call("ListExecutions", "ListExecutions", page)
            for execution, redriven_at in items:
                executions[execution.name] = redriven_at
                started = execution.started_at if redriven_at is None else redriven_at
                oldest = started if oldest is None else min(oldest, started)
            token = items[-1][0].sequence if items else token
            if complete or (
                max_concurrency is not None and len(counted_names(executions, ends)) >= max_concurrency
            ):
                self._service.note_unlisted(self._arn, executions, complete, oldest)
                return RunningListing(
                    executions=executions, complete=complete, listed_at=listed_at, oldest_started_at=oldest
                )

    def state_of(self, name: str) -> ExecutionState | None:
        """`DescribeExecution`, as late as the world's lag allows; None while it shows no execution."""
        arn = execution_arn(self._arn, name)

        def describe() -> ExecutionState | None:
            described = self._world.described(arn)
            if described is None:
                return None
            status, redrive_count = described
            run = self._world.executions[arn].runs[redrive_count]
            closed = status != "RUNNING"
            return ExecutionState(
                status=status,
                redrive_count=redrive_count,
                input=self._world.executions[arn].input,
                error=run.error if closed else None,
                stopped_at=run.ended_at if closed else None,
            )

        return self._call("DescribeExecution", "DescribeExecution", describe)

    def has_input(self, name: str, execution_input: str) -> bool:
        """Whether the existing execution has this input (a lagging read is a `TransientError`)."""
        arn = execution_arn(self._arn, name)

        def compare() -> bool:
            if self._world.described(arn) is None:
                raise TransientError(f"DescribeExecution({name}) does not show the existing execution yet")
            return same_input(self._world.executions[arn].input, execution_input)

        return self._call("DescribeExecution", "DescribeExecution", compare)

    def start(self, name: str, execution_input: str) -> str:
        """`StartExecution`: a new execution, the same again (same name and input, RUNNING), or refused."""

        def start() -> str:
            problem = name_problem(name)
            if problem is not None:
                raise RejectedInputError(f"Step Functions rejected the start: InvalidName: {problem}")
            if len(execution_input.encode()) > MAX_INPUT_BYTES:
                raise RejectedInputError(
                    "Step Functions rejected the start: InvalidExecutionInput: too large"
                )
            arn = execution_arn(self._arn, name)
            existing = self._world.executions.get(arn)
            if existing is not None:
                if existing.runs[-1].ended_at is None and existing.input == execution_input:
                    return arn
                raise ExecutionExistsError(name)
            self._world.started(arn, name, execution_input, by_dispatcher=True)
            self._service.run_started(self._world.executions[arn])
            return arn

        return self._call("StartExecution", "StartExecution", start, start=True)

    def redrive(self, name: str, client_token: str) -> None:
        """`RedriveExecution` by the project's one emulation; refused: `RejectedInputError`."""
        world = self._world

        def run_again(arn: str) -> None:
            world.redrive(arn, by_dispatcher=True)
            self._service.run_started(world.executions[arn])

        def redrive() -> None:
            answer = world.redrives.redrive(
                execution_arn(self._arn, name), client_token, world.now, world.stopped, run_again
            )
            if not answer.ok:
                code, message = answer.document["__type"], answer.document["message"]
                raise RejectedInputError(f"Step Functions refused the redrive: {code}: {message}")

        self._call("RedriveExecution", "RedriveExecution", redrive, start=True)


class TaskTokensView:
    """The `TaskTokens` port on a container's start client: `SendTaskSuccess`, as the world's gates say."""

    def __init__(self, service: StepFunctions, client: Client) -> None:
        self._service = service
        self._client = client

    def succeed(self, token: str, output: str) -> None:
        """Take the token (the world admits its execution), or refuse it with `TokenRefusedError`."""
        gates = self._service.world.gates
        assert gates is not None, "no gate in this world"

        def take() -> None:
            code = gates.succeed(token)
            if code is not None:
                raise TokenRefusedError(f"Step Functions refused the task token: {code}")

        self._client.call(
            "SendTaskSuccess", "SendTaskSuccess", lambda: self._service.admit("SendTaskSuccess"), take
        )
