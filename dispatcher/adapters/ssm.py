"""SSM Parameter Store: the control parameter (live MAX and pause)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.utilities.parameters import SSMProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.aws_errors import error_code, translate
from dispatcher.control import CONTROL_MAX_AGE_SECONDS, Control, parse_control
from dispatcher.errors import ConfigurationError

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient

NOT_FOUND = "ParameterNotFound"


class ControlParameter:
    """The control parameter, read through Powertools Parameters with a short cache."""

    def __init__(self, name: str, *, client: SSMClient, provider: SSMProvider | None = None) -> None:
        self.name = name
        self._client = client
        self._provider = provider or SSMProvider(boto3_client=client)

    def read(self, *, fresh: bool = False) -> Control | None:
        """The operator's overrides, or None when the parameter doesn't exist.

        A read is reused for at most ``CONTROL_MAX_AGE_SECONDS`` unless ``fresh``.
        Raises ``ConfigurationError`` for a malformed value or a denied read, and
        ``TransientError`` when SSM is still throttling after botocore's retries.
        """
        try:
            value = self._provider.get(self.name, max_age=CONTROL_MAX_AGE_SECONDS, force_fetch=fresh)
        except GetParameterError as error:
            # Powertools wraps every failure; the botocore error is its context.
            cause = error.__context__
            if isinstance(cause, ClientError) and error_code(cause) == NOT_FOUND:
                return None
            if isinstance(cause, ClientError | BotoCoreError):
                raise translate(cause, f"GetParameter({self.name})") from error
            raise ConfigurationError(f"control parameter {self.name} could not be read: {error}") from error
        if not isinstance(value, str):
            raise ConfigurationError(f"control parameter {self.name} is not a String parameter")
        return parse_control(self.name, value)

    def write(self, control: Control) -> None:
        """Replace the parameter's value (the CLI's read, modify, write)."""
        try:
            self._client.put_parameter(Name=self.name, Value=control.as_json(), Type="String", Overwrite=True)
        except (ClientError, BotoCoreError) as error:
            raise translate(error, f"PutParameter({self.name})") from error
