"""SSM Parameter Store: the control parameter (live MAX and pause), read and written with boto3.

The CLI reads it fresh and writes it (read, modify, write). The function reads it
through Powertools' cache instead (`dispatcher.adapters.cached_control`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dispatcher.adapters.errors import translated
from dispatcher.core.control import Control, parse_control, parse_document

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
        value = self._value()
        return None if value is None else parse_control(self.name, value)

    def read_document(self) -> dict[str, Any] | None:
        """The value as a JSON object, not yet checked key by key (what the CLI mends); None: no parameter.

        A value that isn't a JSON object is a ``ConfigurationError``.
        """
        value = self._value()
        return None if value is None else parse_document(self.name, value)

    def _value(self) -> str | None:
        try:
            with translated(f"GetParameter({self.name})", {NOT_FOUND: _NotFoundError}):
                return self._client.get_parameter(Name=self.name)["Parameter"]["Value"]
        except _NotFoundError:
            return None

    def write(self, control: Control) -> None:
        """Replace the parameter's value (the CLI's read, modify, write)."""
        with translated(f"PutParameter({self.name})"):
            self._client.put_parameter(Name=self.name, Value=control.as_json(), Type="String", Overwrite=True)
