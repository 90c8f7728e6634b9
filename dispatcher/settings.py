"""Where a dispatcher's configuration comes from: the one home of every variable and output name.

The function reads its environment into `Settings` (one pydantic model, mirrored in
``template.yaml``): each field is read from the variable named as the field in capitals.
The CLI reads the same variables (and two of its own) or, with ``--stack``, the stack
outputs named in `STACK_OUTPUTS`; the local emulator sets both from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dispatcher.core.errors import ConfigurationError, problems
from dispatcher.core.lanes import parse_lanes
from dispatcher.core.lanes_document import STATE_MACHINE_ARN_PATTERN
from dispatcher.core.topology import DEFAULT, Lane, Topology

MAX_START_CONCURRENCY = 32
"""Each concurrent start holds one HTTP connection; the clients' pools are sized to match."""


def variable(field: str) -> str:
    """The environment variable a field is read from."""
    return field.upper()


class Settings(BaseModel):
    """Environment variables of the dispatcher function (names are the public contract)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    queue_url: str = Field(min_length=1, description="The source SQS FIFO queue.")
    dead_letter_queue_url: str = Field(
        min_length=1, description="The FIFO queue for messages that can never start."
    )
    state_machine_arn: str = Field(
        pattern=STATE_MACHINE_ARN_PATTERN,
        description="The STANDARD state machine to start.",
    )
    max_concurrency: int = Field(ge=0, description="RUNNING executions allowed; 0 pauses.")
    state_table: str = Field(min_length=3, description="DynamoDB table of recent starts.")
    receive_wait_seconds: int = Field(
        default=1,
        ge=0,
        le=20,
        description="Long-poll wait of each ReceiveMessage; the tick ends on an empty receive.",
    )
    time_margin_seconds: float = Field(
        default=10.0,
        ge=0,
        description="Stop admitting when less Lambda time than this remains (one round of starts).",
    )
    start_concurrency: int = Field(
        default=0,
        ge=0,
        le=MAX_START_CONCURRENCY,
        description=(
            "Message groups whose executions are started at once (each group in send order);"
            " 0 sizes it from StartExecution's quota and measured latency (4 to 32)."
        ),
    )
    list_reuse_seconds: float = Field(
        default=1.0,
        ge=0,
        le=10,
        description="A warm container reuses a ListExecutions read for this long (0: read on every tick).",
    )
    control_parameter: str | None = Field(
        default=None,
        min_length=1,
        description="SSM parameter with live overrides: JSON {max_concurrency, paused} (read every tick).",
    )
    loop_seconds: float = Field(
        default=0.0,
        ge=0,
        le=900,
        description="Keep ticking in one invocation for up to this long while jobs wait (0: one tick).",
    )

    max_per_group: int | None = Field(
        default=None,
        ge=1,
        description="Lane default: at most this many RUNNING executions of one message group (absent: none).",
    )
    fair_share: bool = Field(
        default=False,
        description="Lane default: free slots go first to the message groups with fewest RUNNING.",
    )
    max_wait_seconds: int | None = Field(
        default=None,
        ge=1,
        description="Lane default: a job received this long after it was sent expires (absent: no bound).",
    )

    lanes: str | None = Field(
        default=None,
        description=(
            "JSON {pools, lanes}: more queues and state machines sharing limits (absent: one lane,"
            " default, in one pool, default)."
        ),
    )
    wake_queue_url: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "The queue producers wake the dispatcher on after queueing (the end-event queue;"
            " the function only carries it for producers in its environment: absent, no wakes)."
        ),
    )

    def topology(self) -> Topology:
        """Every pool and lane: the environment's own (``default``) and those ``LANES`` adds."""
        default = Lane(
            name=DEFAULT,
            pool=DEFAULT,
            queue_url=self.queue_url,
            dead_letter_queue_url=self.dead_letter_queue_url,
            state_machine_arn=self.state_machine_arn,
            max_per_group=self.max_per_group,
            fair_share=self.fair_share,
            max_wait_seconds=self.max_wait_seconds,
        )
        return parse_lanes(self.lanes, default, self.max_concurrency)

    @classmethod
    def variables(cls) -> list[str]:
        """Every variable the function reads."""
        return [variable(field) for field in cls.model_fields]

    def environment(self) -> dict[str, str]:
        """These settings as the function's environment (variables left at their default left out)."""
        return {
            variable(field): str(value)
            for field, value in self.model_dump(exclude_defaults=True).items()
            if value is not None
        }


OPERATOR_FIELDS = ("spool_queue_url", "dispatcher_function_name")
"""What the CLI reads beyond the function's variables: the failure spool and the function."""

STACK_OUTPUTS = {
    "queue_url": "JobQueueUrl",
    "dead_letter_queue_url": "DeadLetterQueueUrl",
    "state_machine_arn": "StateMachineArn",
    "state_table": "StateTableName",
    "control_parameter": "ControlParameterName",
    "dispatcher_function_name": "DispatcherFunctionName",
    "spool_queue_url": "SpoolQueueUrl",
    "wake_queue_url": "WakeQueueUrl",
}
"""Field → the stack output (template.yaml's ``Outputs``) the CLI reads it from with ``--stack``."""
PRODUCER_OUTPUTS = (STACK_OUTPUTS["queue_url"], "ProducerPolicyArn")
"""What a producer needs from a deployed stack: where to send, and the policy that lets it."""
DASHBOARD_OUTPUT = "DashboardUrl"
TEMPLATE_GATE = "gate"
"""The name of the template's gate (``Gate=true``), and of `dispatcher local --gate`'s."""
RELEASE_QUEUE_OUTPUT = "ReleaseQueueUrl"
"""Where a gated workflow sends its releases (the template's end-event queue)."""
GATED_WORKFLOW_POLICY_OUTPUT = "GatedWorkflowPolicyArn"
"""The policy a gated workflow's role attaches (send requests and releases, nothing else)."""
MAX_CONCURRENCY_PARAMETER = "MaxConcurrency"
"""The stack parameter the CLI reads MAX from with ``--stack``."""
LANES_PARAMETER = "Lanes"
"""The stack parameter ``LANES`` comes from (a stack deployed before `LANES_OUTPUT` was declared)."""
LANES_OUTPUT = "LanesDocument"
"""The stack output of the ``LANES`` the function runs with (the Lanes parameter, or the template's
gate): the CLI reads it with ``--stack``, else the parameter."""


def read_variables(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables `Settings` reads, as they are set (names matched without regard to case), in order."""
    fields = set(Settings.model_fields)
    return tuple(sorted((key, value) for key, value in environ.items() if key.lower() in fields))


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the environment, raising a ``ConfigurationError`` that names each bad variable.

    A variable's name is matched without regard to case.
    """
    environ = os.environ if environ is None else environ
    found = {key.lower(): value for key, value in read_variables(environ)}
    try:
        return Settings.model_validate(found)
    except ValidationError as error:
        raise ConfigurationError(f"invalid dispatcher environment: {problems(error, variable)}") from error
