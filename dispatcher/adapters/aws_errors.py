"""Translate botocore failures into the dispatcher's error vocabulary."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from dispatcher.errors import ConfigurationError, TransientError

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
    if not isinstance(error, ClientError):
        return error
    code = error_code(error)
    message = error.response.get("Error", {}).get("Message", "")
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    if code in CONFIGURATION_CODES:
        return ConfigurationError(f"{action} failed with {code}: {message}")
    if code in TRANSIENT_CODES or status >= SERVER_ERROR:
        return TransientError(f"{action} failed with {code or status}: {message}")
    return error
