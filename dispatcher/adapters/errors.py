"""Translate botocore failures into the dispatcher's error vocabulary, in one place.

Every adapter call goes through `translated`: a ``ClientError`` or ``BotoCoreError``
leaves it as a `ConfigurationError`, a `TransientError`, an error the caller named for
its code (``codes``), or unchanged when its meaning isn't known. An answer botocore can't
parse (an HTML error page from a proxy or an emulator) is a `TransientError`, like a 5xx.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from dispatcher.core.errors import ConfigurationError, TransientError

# Codes that mean the deployment itself is wrong: retrying the tick won't help
# and no message is to blame, so the tick stops loudly.
CONFIGURATION_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "InvalidArn",
        "InvalidSecurity",
        "KmsAccessDeniedException",
        "KmsInvalidStateException",
        "KMS.AccessDeniedException",
        "KMS.DisabledException",
        "KMS.NotFoundException",
        "ResourceNotFoundException",
        "StateMachineDeleting",
        "StateMachineDoesNotExist",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredTokenException",
        "MissingAuthenticationToken",
        "InvalidSignatureException",
    }
)

SERVER_ERROR = 500

# Codes that are worth another tick: AWS is busy, or briefly failing.
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "KmsThrottlingException",
        "KMS.ThrottlingException",
        "ExecutionLimitExceeded",
        "ServiceUnavailable",
        "InternalFailure",
        "InternalServerError",
        "InternalError",
        "RequestTimeout",
    }
)


def error_code(error: ClientError) -> str:
    """The service's error code (empty when the response had none)."""
    return str(error.response.get("Error", {}).get("Code", ""))


def translate(error: Exception, action: str) -> Exception:
    """The dispatcher error a botocore failure of ``action`` stands for.

    Unknown client errors come back unchanged: they stop the tick loudly, which is
    the safe default when the meaning isn't known.
    """
    if isinstance(error, BotoCoreError):
        return TransientError(f"{action} failed: {error}")
    if isinstance(error, ResponseParserError):
        return TransientError(f"{action} failed: the answer was not an AWS response")
    if not isinstance(error, ClientError):
        return error
    code = error_code(error)
    message = error_message(error)
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if code in CONFIGURATION_CODES:
        return ConfigurationError(f"{action} failed with {code}: {message}")
    if code in TRANSIENT_CODES or status >= SERVER_ERROR:
        return TransientError(f"{action} failed with {code or status}: {message}")
    return error


def error_message(error: ClientError) -> str:
    """The service's error message (empty when the response had none)."""
    return str(error.response.get("Error", {}).get("Message", ""))


CodeError = Callable[[ClientError], Exception]
"""Makes the exception a call raises for one error code (given the botocore error)."""


@contextmanager
def translated(action: str, codes: Mapping[str, CodeError] | None = None) -> Iterator[None]:
    """Raise botocore failures of ``action`` as the dispatcher's errors.

    ``codes``: error codes this call gives a meaning of its own (e.g. a refused
    condition), each mapped to the exception to raise instead.
    """
    try:
        yield
    except ClientError as error:
        special = (codes or {}).get(error_code(error))
        raise (special(error) if special else translate(error, action)) from error
    except (BotoCoreError, ResponseParserError) as error:
        raise translate(error, action) from error
