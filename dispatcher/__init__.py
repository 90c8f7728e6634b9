"""dispatcher: a hard concurrency cap in front of AWS Step Functions."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _installed_version

from dispatcher.core.errors import (
    ConfigurationError,
    DispatcherError,
    ExecutionExistsError,
    RejectedInputError,
    TransientError,
)

DISTRIBUTION = "stepfunctions-dispatcher"
"""The distribution's name on the package index (``dispatcher`` there is an unrelated package)."""


def version() -> str:
    """The installed distribution's version ("unknown" when run from sources not installed)."""
    try:
        return _installed_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown (not installed)"


def install_hint(extra: str) -> str:
    """How to install the distribution with ``extra``, from the index or a clone."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (in a clone of the repository: pip install '.[{extra}]')"


__all__ = [
    "DISTRIBUTION",
    "ConfigurationError",
    "DispatcherError",
    "ExecutionExistsError",
    "RejectedInputError",
    "TransientError",
    "install_hint",
    "version",
]
