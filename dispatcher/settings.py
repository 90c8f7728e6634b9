"""The dispatcher's environment: one pydantic model, mirrored 1:1 in ``template.yaml``."""

from __future__ import annotations

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from dispatcher.errors import ConfigurationError

# Each concurrent start holds one HTTP connection; the clients' pools are sized to match.
MAX_START_CONCURRENCY = 32


class Settings(BaseSettings):
    """Environment variables of the dispatcher function (names are the public contract)."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", case_sensitive=False)

    queue_url: str = Field(min_length=1, description="The source SQS FIFO queue.")
    dead_letter_queue_url: str = Field(
        min_length=1, description="The FIFO queue for messages that can never start."
    )
    state_machine_arn: str = Field(
        pattern=r"^arn:aws[\w-]*:states:[\w-]+:\d{12}:stateMachine:[^:]+$",
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
        default=10,
        ge=1,
        le=MAX_START_CONCURRENCY,
        description="Message groups whose executions are started at once (each group in send order).",
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


def load_settings() -> Settings:
    """Read the environment, raising a ``ConfigurationError`` that names each bad variable."""
    try:
        return Settings()
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']).upper()}: {issue['msg']}"
            for issue in error.errors()
        )
        raise ConfigurationError(f"invalid dispatcher environment: {problems}") from error
