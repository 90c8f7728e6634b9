"""dispatcher: a hard concurrency cap in front of AWS Step Functions."""

from dispatcher.errors import (
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
