"""dispatcher: a hard concurrency cap in front of AWS Step Functions."""

from dispatcher.core.errors import (
    ConfigurationError,
    DispatcherError,
    ExecutionExistsError,
    RejectedInputError,
    TransientError,
)

__all__ = [
    "ConfigurationError",
    "DispatcherError",
    "ExecutionExistsError",
    "RejectedInputError",
    "TransientError",
]
