"""Step Functions: the target state machine and its executions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from dispatcher.adapters.errors import CodeError, error_code, error_message, translated
from dispatcher.core.counting import LIST_PAGE_SIZE, RunningListing, counted_names
from dispatcher.core.errors import (
    ConfigurationError,
    ExecutionExistsError,
    RejectedInputError,
    TokenRefusedError,
    TransientError,
)
from dispatcher.core.executions import ExecutionState, execution_arn, same_input
from dispatcher.core.jobs import ExecutionFacts

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient
    from mypy_boto3_stepfunctions.type_defs import DescribeExecutionOutputTypeDef

REJECTED_INPUT_CODES = ("InvalidName", "InvalidExecutionInput", "ValidationException")
"""Step Functions' own verdicts on one message's name or input: that message is poison."""
NOT_REDRIVABLE_CODES = ("ExecutionNotRedrivable", "ExecutionDoesNotExist", "ValidationException")
"""... and on one redrive: the execution can't be redriven (gone, succeeded, too old)."""
NO_SUCH_EXECUTION = "ExecutionDoesNotExist"
REFUSED_TOKEN_CODES = ("TaskTimedOut", "TaskDoesNotExist", "InvalidToken")
"""Step Functions' verdicts on one task token: its task is closed (timed out, ended, or done)."""


class _NoSuchExecutionError(Exception):
    """`DescribeExecution` says there is no such execution (yet)."""


def _rejected(verdict: str) -> CodeError:
    def rejected(error: ClientError) -> Exception:
        return RejectedInputError(f"Step Functions {verdict}: {error_code(error)}: {error_message(error)}")

    return rejected


class StateMachine:
    """The STANDARD state machine the dispatcher starts executions of."""

    def __init__(self, client: SFNClient, arn: str, *, start_client: SFNClient | None = None) -> None:
        """``start_client``: the client for `StartExecution` (with its own retry mode); else ``client``."""
        self._client = client
        self._start_client = start_client or client
        self.arn = arn

    def ensure_standard(self) -> None:
        """Raise a ``ConfigurationError`` unless the state machine exists and is STANDARD."""
        with translated(f"DescribeStateMachine({self.arn})"):
            description = self._client.describe_state_machine(stateMachineArn=self.arn)
        if description["type"] != "STANDARD":
            raise ConfigurationError(
                f"state machine {self.arn} is {description['type']}: the dispatcher needs a"
                " STANDARD state machine, because EXPRESS executions cannot be listed or counted"
            )

    def list_running(
        self, max_concurrency: int | None, ends: Mapping[str, float], listed_at: float
    ) -> RunningListing:
        """List RUNNING executions, paging only until MAX of them hold a slot (None: every one).

        Executions that ``ends`` says have ended (and weren't redriven since) are still
        listed for a while; they are paged past, not counted, so the pages read grow
        with MAX, not with the backlog.
        """
        executions: dict[str, float | None] = {}
        oldest: float | None = None
        token: str | None = None
        while True:
            request: dict[str, Any] = {
                "stateMachineArn": self.arn,
                "statusFilter": "RUNNING",
                "maxResults": LIST_PAGE_SIZE,
            }
            if token:
                request["nextToken"] = token
            with translated("ListExecutions"):
                page = self._client.list_executions(**request)
            for item in page["executions"]:
                redrive_date = item.get("redriveDate")
                executions[item["name"]] = None if redrive_date is None else redrive_date.timestamp()
                # A redriven execution's age counts from its redrive: its last (re)start.
                started = (redrive_date or item["startDate"]).timestamp()
                oldest = started if oldest is None else min(oldest, started)
            token = page.get("nextToken")
            complete = not token
            if complete or (
                max_concurrency is not None and len(counted_names(executions, ends)) >= max_concurrency
            ):
                return RunningListing(
                    executions=executions, complete=complete, listed_at=listed_at, oldest_started_at=oldest
                )

    def _describe(self, name: str, missing: CodeError) -> DescribeExecutionOutputTypeDef:
        with translated("DescribeExecution", {NO_SUCH_EXECUTION: missing}):
            return self._client.describe_execution(executionArn=execution_arn(self.arn, name))

    def facts(self, name: str) -> ExecutionFacts | None:
        """Where execution ``name`` is and when it ran; None when there is none."""
        try:
            description = self._describe(name, _NoSuchExecutionError)
        except _NoSuchExecutionError:
            return None
        stopped = description.get("stopDate")
        return ExecutionFacts(
            arn=description["executionArn"],
            status=description["status"],
            started_at=description["startDate"].timestamp(),
            stopped_at=None if stopped is None else stopped.timestamp(),
            error=description.get("error"),
        )

    def stop(self, name: str, error: str, cause: str) -> None:
        """Stop execution ``name`` (`StopExecution`, with this error and cause)."""
        with translated("StopExecution"):
            self._client.stop_execution(executionArn=execution_arn(self.arn, name), error=error, cause=cause)

    def state_of(self, name: str) -> ExecutionState | None:
        """Status, ``redriveCount`` and input of execution ``name``; None when there is none."""
        try:
            description = self._describe(name, _NoSuchExecutionError)
        except _NoSuchExecutionError:
            return None
        return ExecutionState(
            status=description["status"],
            redrive_count=int(description.get("redriveCount") or 0),
            input=description.get("input"),
            error=description.get("error") or None,
            stopped_at=None if "stopDate" not in description else description["stopDate"].timestamp(),
        )

    def redrive(self, name: str, client_token: str) -> None:
        """Redrive execution ``name`` from its failed state (the same token for every attempt).

        Raises ``RejectedInputError`` when Step Functions says it can't be redriven, and
        the translated error otherwise.
        """
        refused = _rejected("refused the redrive")
        with translated("RedriveExecution", dict.fromkeys(NOT_REDRIVABLE_CODES, refused)):
            self._start_client.redrive_execution(
                executionArn=execution_arn(self.arn, name), clientToken=client_token
            )

    def has_input(self, name: str, execution_input: str) -> bool:
        """Whether the existing execution ``name`` was started with this input."""

        def lagging(error: ClientError) -> Exception:
            # StartExecution just said it exists: DescribeExecution is eventually
            # consistent and hasn't caught up. Ask again on a later tick.
            return TransientError(f"DescribeExecution({name}) does not show the existing execution yet")

        return same_input(self._describe(name, lagging).get("input"), execution_input)

    def start(self, name: str, execution_input: str) -> str:
        """Start execution ``name`` with ``execution_input`` verbatim; return its ARN.

        Raises ``ExecutionExistsError`` when the name is taken by a closed execution
        or one with another input, ``RejectedInputError`` when Step Functions refuses
        this message, and the translated error otherwise.
        """
        codes: dict[str, CodeError] = dict.fromkeys(REJECTED_INPUT_CODES, _rejected("rejected the start"))
        codes["ExecutionAlreadyExists"] = lambda error: ExecutionExistsError(name)
        with translated("StartExecution", codes):
            response = self._start_client.start_execution(
                stateMachineArn=self.arn, name=name, input=execution_input
            )
        return response["executionArn"]


class TaskTokens:
    """Task tokens of waiting executions: a gate admits one with `SendTaskSuccess`."""

    def __init__(self, client: SFNClient) -> None:
        self._client = client

    def succeed(self, token: str, output: str) -> None:
        """Complete the task of ``token`` with ``output``; `TokenRefusedError` when its task is closed."""

        def refused(error: ClientError) -> Exception:
            retries = int(error.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)
            return TokenRefusedError(
                f"Step Functions refused the task token: {error_code(error)}: {error_message(error)}",
                retried=retries > 0,
            )

        with translated("SendTaskSuccess", dict.fromkeys(REFUSED_TOKEN_CODES, refused)):
            self._client.send_task_success(taskToken=token, output=output)
