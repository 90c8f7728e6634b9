"""Step Functions: the target state machine and its executions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.aws_errors import error_code, translate
from dispatcher.errors import ConfigurationError, ExecutionExistsError, RejectedInputError, TransientError
from dispatcher.models import RunningListing
from dispatcher.planning import LIST_PAGE_SIZE, counted_names

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

# Step Functions' own verdicts on one message's name or input: that message is poison.
REJECTED_INPUT_CODES = frozenset({"InvalidName", "InvalidExecutionInput", "ValidationException"})
# ... and on one redrive: the execution can't be redriven (gone, succeeded, too old).
NOT_REDRIVABLE_CODES = frozenset({"ExecutionNotRedrivable", "ExecutionDoesNotExist", "ValidationException"})


@dataclass(frozen=True)
class ExecutionState:
    """What `DescribeExecution` says of one execution."""

    status: str
    redrive_count: int
    input: str | None
    """None when Step Functions left it out (no permission on its KMS key)."""


class StateMachine:
    """The STANDARD state machine the dispatcher starts executions of."""

    def __init__(self, client: SFNClient, arn: str, *, start_client: SFNClient | None = None) -> None:
        """``start_client``: the client for `StartExecution` (with its own retry mode); else ``client``."""
        self._client = client
        self._start_client = start_client or client
        self.arn = arn

    def execution_arn(self, name: str) -> str:
        """The deterministic ARN of the execution called ``name``."""
        prefix, _, machine = self.arn.rpartition(":stateMachine:")
        return f"{prefix}:execution:{machine}:{name}"

    def ensure_standard(self) -> None:
        """Raise a ``ConfigurationError`` unless the state machine exists and is STANDARD."""
        try:
            description = self._client.describe_state_machine(stateMachineArn=self.arn)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, f"DescribeStateMachine({self.arn})") from error
        if description["type"] != "STANDARD":
            raise ConfigurationError(
                f"state machine {self.arn} is {description['type']}: the dispatcher needs a"
                " STANDARD state machine, because EXPRESS executions cannot be listed or counted"
            )

    def list_running(
        self, max_concurrency: int, ends: Mapping[str, float], listed_at: float
    ) -> RunningListing:
        """List RUNNING executions, paging only until MAX of them hold a slot.

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
            try:
                page = self._client.list_executions(**request)
            except (ClientError, BotoCoreError) as error:
                raise translate(error, "ListExecutions") from error
            for item in page["executions"]:
                redrive_date = item.get("redriveDate")
                executions[item["name"]] = None if redrive_date is None else redrive_date.timestamp()
                started = item["startDate"].timestamp()
                oldest = started if oldest is None else min(oldest, started)
            token = page.get("nextToken")
            if not token:
                return RunningListing(
                    executions=executions, complete=True, listed_at=listed_at, oldest_started_at=oldest
                )
            if len(counted_names(executions, ends)) >= max_concurrency:
                return RunningListing(
                    executions=executions, complete=False, listed_at=listed_at, oldest_started_at=oldest
                )

    def state_of(self, name: str) -> ExecutionState | None:
        """Status, ``redriveCount`` and input of execution ``name``; None when there is none."""
        try:
            description = self._client.describe_execution(executionArn=self.execution_arn(name))
        except ClientError as error:
            if error_code(error) == "ExecutionDoesNotExist":
                return None
            raise translate(error, "DescribeExecution") from error
        except BotoCoreError as error:
            raise translate(error, "DescribeExecution") from error
        return ExecutionState(
            status=description["status"],
            redrive_count=int(description.get("redriveCount") or 0),
            input=description.get("input"),
        )

    def redrive(self, name: str, client_token: str) -> None:
        """Redrive execution ``name`` from its failed state (the same token for every attempt).

        Raises ``RejectedInputError`` when Step Functions says it can't be redriven, and
        the translated error otherwise.
        """
        try:
            self._start_client.redrive_execution(
                executionArn=self.execution_arn(name), clientToken=client_token
            )
        except ClientError as error:
            code = error_code(error)
            if code in NOT_REDRIVABLE_CODES:
                message = error.response.get("Error", {}).get("Message", "")
                raise RejectedInputError(f"Step Functions refused the redrive: {code}: {message}") from error
            raise translate(error, "RedriveExecution") from error
        except BotoCoreError as error:
            raise translate(error, "RedriveExecution") from error

    def has_input(self, name: str, execution_input: str) -> bool:
        """Whether the existing execution ``name`` was started with this input."""
        try:
            description = self._client.describe_execution(executionArn=self.execution_arn(name))
        except ClientError as error:
            if error_code(error) == "ExecutionDoesNotExist":
                # StartExecution just said it exists: DescribeExecution is eventually
                # consistent and hasn't caught up. Ask again on a later tick.
                raise TransientError(
                    f"DescribeExecution({name}) does not show the existing execution yet"
                ) from error
            raise translate(error, "DescribeExecution") from error
        except BotoCoreError as error:
            raise translate(error, "DescribeExecution") from error
        existing = description.get("input")
        if existing is None or existing == execution_input:
            # Input is left out only when the caller may not see it; assume it matches
            # rather than dead-letter a redelivered message.
            return True
        try:
            return bool(json.loads(existing) == json.loads(execution_input))
        except ValueError:
            return False

    def start(self, name: str, execution_input: str) -> str:
        """Start execution ``name`` with ``execution_input`` verbatim; return its ARN.

        Raises ``ExecutionExistsError`` when the name is taken by a closed execution
        or one with another input, ``RejectedInputError`` when Step Functions refuses
        this message, and the translated error otherwise.
        """
        try:
            response = self._start_client.start_execution(
                stateMachineArn=self.arn, name=name, input=execution_input
            )
        except ClientError as error:
            code = error_code(error)
            if code == "ExecutionAlreadyExists":
                raise ExecutionExistsError(name) from error
            if code in REJECTED_INPUT_CODES:
                message = error.response.get("Error", {}).get("Message", "")
                raise RejectedInputError(f"Step Functions rejected the start: {code}: {message}") from error
            raise translate(error, "StartExecution") from error
        except BotoCoreError as error:
            raise translate(error, "StartExecution") from error
        return response["executionArn"]
