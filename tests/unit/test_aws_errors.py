"""Botocore failures translate into stop-loudly, back-off, or unknown (re-raised)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from dispatcher.adapters.errors import translate
from dispatcher.core.errors import ConfigurationError, TransientError


def client_error(code: str, status: int = 400) -> ClientError:
    """A botocore `ClientError` with ``code`` and HTTP ``status``."""
    return ClientError(
        {
            "Error": {"Code": code, "Message": f"{code} happened"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "StartExecution",
    )


@pytest.mark.parametrize(
    "code",
    [
        "StateMachineDoesNotExist",
        "AccessDeniedException",
        "AWS.SimpleQueueService.NonExistentQueue",
        "ResourceNotFoundException",
        "InvalidArn",
        "UnrecognizedClientException",
    ],
)
def test_translate_configuration_codes_stop_the_tick(code: str) -> None:
    """Codes that mean the deployment is wrong become ConfigurationError, naming the code."""
    translated = translate(client_error(code), "StartExecution")
    assert isinstance(translated, ConfigurationError)
    assert code in str(translated)


@pytest.mark.parametrize(
    ("code", "status"),
    [("ThrottlingException", 400), ("ServiceUnavailable", 503), ("SomethingNew", 500), ("", 502)],
)
def test_translate_throttling_and_5xx_are_transient(code: str, status: int) -> None:
    """Throttling and server errors still failing after retries are back-pressure."""
    assert isinstance(translate(client_error(code, status), "ReceiveMessage"), TransientError)


@pytest.mark.parametrize(
    "error",
    [EndpointConnectionError(endpoint_url="https://states"), ReadTimeoutError(endpoint_url="https://states")],
)
def test_translate_connection_failures_are_transient(error: Exception) -> None:
    """A connection that fails or times out is transient, not a configuration error."""
    assert isinstance(translate(error, "ListExecutions"), TransientError)


def test_translate_unknown_client_error_is_returned_unchanged() -> None:
    """An error whose meaning isn't known is re-raised as it is: loud, never swallowed."""
    error = client_error("SomethingNew", 400)
    assert translate(error, "StartExecution") is error


def test_translate_non_botocore_error_is_returned_unchanged() -> None:
    """Errors that aren't botocore's pass through."""
    error = ValueError("bug")
    assert translate(error, "anything") is error
