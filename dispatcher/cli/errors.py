"""The CLI's two kinds of failure, each reported as one line on stderr (a line a problem)."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)
from botocore.parsers import ResponseParserError

from dispatcher.adapters.errors import error_code, error_message


class CliError(Exception):
    """A failure to report as one line (exit status 1)."""


class UsageError(CliError):
    """A usage error (exit status 2): everything wrong with the command line, its files or settings.

    Found before any AWS call and reported together, one line a problem.
    """

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class InterruptedRunError(CliError):
    """Ctrl-C during long work: one line saying what was done and whether running it again is safe."""


INTERRUPTED = 130
"""The shell's exit status for a program stopped by Ctrl-C (128 + SIGINT)."""

PROG = "dispatcher"
"""The command's name, which every error line starts with."""


CREDENTIALS_HINT = (
    "configure credentials (aws configure, AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY;"
    " for the emulator, the exports `dispatcher local` prints)"
)
CREDENTIAL_CODES = frozenset(
    {"UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException"}
)


def aws_failure(error: BaseException, endpoint_url: str | None) -> str:
    """One line for a failure from AWS (raised, or an adapter's error's cause), with the fix when known."""
    failures = ClientError | BotoCoreError | ResponseParserError
    cause = error.__cause__ if isinstance(error.__cause__, failures) else error
    unreached = _unreached(cause, endpoint_url)
    if unreached is not None:
        return unreached
    if isinstance(cause, ClientError):
        code = error_code(cause)
        line = (
            str(error)
            if cause is not error
            else f"{cause.operation_name} failed: {code}: {error_message(cause)}"
        )
        return f"{line} ({CREDENTIALS_HINT})" if code in CREDENTIAL_CODES else line
    return str(error)


def _unreached(cause: BaseException, endpoint_url: str | None) -> str | None:
    """The line for a call that never got an AWS answer (no region, no credentials, no server), or None."""
    if isinstance(cause, NoRegionError):
        return "no AWS region: pass --region or set AWS_DEFAULT_REGION (the emulator's is us-east-1)"
    if isinstance(cause, NoCredentialsError):
        return f"no AWS credentials: {CREDENTIALS_HINT}"
    if isinstance(cause, EndpointConnectionError):
        if endpoint_url:
            return (
                f"nothing answers at {endpoint_url}: is `dispatcher local` running?"
                " (else check --endpoint-url or AWS_ENDPOINT_URL)"
            )
        return f"{cause} (check --region and the network)"
    if isinstance(cause, ResponseParserError):
        return (
            f"{endpoint_url or 'AWS'} answered with something that is not an AWS response:"
            " check --region (the emulator's is us-east-1) and --endpoint-url"
        )
    return None
