"""SSM Parameter Store: the control parameter as the function reads it, through Powertools Parameters.

A read is reused for at most ``CONTROL_MAX_AGE_SECONDS`` (Powertools' own default would be
300 s), so a warm container doesn't call SSM on every tick and still sees a change
within seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.utilities.parameters import SSMProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.adapters.control import NOT_FOUND
from dispatcher.adapters.errors import error_code, translate
from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS, Control, parse_control
from dispatcher.core.errors import ConfigurationError

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient


class CachedControlParameter:
    """The control parameter, read through Powertools Parameters with a short cache."""

    def __init__(self, name: str, *, client: SSMClient, provider: SSMProvider | None = None) -> None:
        self.name = name
        self._provider = provider or SSMProvider(boto3_client=client)

    def read(self) -> Control | None:
        """The operator's overrides, or None when the parameter doesn't exist.

        Raises ``ConfigurationError`` for a malformed value or a denied read, and
        ``TransientError`` when SSM is still throttling after botocore's retries.
        """
        try:
            value = self._provider.get(self.name, max_age=CONTROL_MAX_AGE_SECONDS)
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
