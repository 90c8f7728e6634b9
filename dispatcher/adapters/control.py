"""SSM Parameter Store: the control parameter (live MAX and pause), read and written with boto3.

The CLI reads it fresh and writes it (read, modify, write). The function reads it
through Powertools' cache instead (`dispatcher.adapters.cached_control`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatcher.adapters.errors import translated
from dispatcher.core.control import Control, parse_control

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient

NOT_FOUND = "ParameterNotFound"


class _NotFoundError(Exception):
    """The parameter doesn't exist."""


class ControlParameter:
    """The control parameter, as an operator reads and writes it."""

    def __init__(self, name: str, *, client: SSMClient) -> None:
        self.name = name
        self._client = client

    def read(self) -> Control | None:
        """The operator's overrides as they are now, or None when the parameter doesn't exist.

        Raises ``ConfigurationError`` for a malformed value or a denied read, and
        ``TransientError`` when SSM is still throttling after botocore's retries.
        """
        try:
            with translated(f"GetParameter({self.name})", {NOT_FOUND: _NotFoundError}):
                value = self._client.get_parameter(Name=self.name)["Parameter"]["Value"]
        except _NotFoundError:
            return None
        return parse_control(self.name, value)

    def write(self, control: Control) -> None:
        """Replace the parameter's value (the CLI's read, modify, write)."""
        with translated(f"PutParameter({self.name})"):
            self._client.put_parameter(Name=self.name, Value=control.as_json(), Type="String", Overwrite=True)
