"""Where the dispatcher's process can die, and the plan to kill it there: one home for both harnesses.

The fault harness kills the real handler on moto (`tests/faults/process.py`), the
in-memory AWS kills the tick at its ports (`tests/support/sim/faults.py`); both name a
step by ``service.Operation``, and a state table write by what it is for
(``dynamodb.BatchWriteItem:record``, ``:forget`` or ``:end``, ``dynamodb.PutItem:lease``).
"""

from __future__ import annotations

from dataclasses import dataclass

CRASH_POINTS = (
    ("sqs.ReceiveMessage", "after"),
    ("dynamodb.BatchWriteItem:record", "after"),
    ("states.StartExecution", "before"),
    ("states.StartExecution", "after"),
    ("sqs.SendMessage", "after"),
    ("sqs.DeleteMessageBatch", "before"),
    ("sqs.DeleteMessageBatch", "after"),
    ("sqs.ChangeMessageVisibilityBatch", "after"),
    ("dynamodb.Query", "after"),
    ("states.DescribeExecution", "after"),
    ("dynamodb.BatchWriteItem:forget", "after"),
    ("dynamodb.BatchWriteItem:end", "after"),
    ("dynamodb.PutItem:lease", "after"),
    ("dynamodb.DeleteItem", "before"),
    ("states.RedriveExecution", "before"),
    ("states.RedriveExecution", "after"),
)
"""Where a tick can die: after receive, after recording a round's starts, around
StartExecution (after the first of a round: the rest of the round unstarted), after
dead-lettering, before and in the middle of deleting (the batch was applied, the
answer never read), while releasing, while counting (forgetting ended starts), and
after recording the end a status change event reported, and around a redrive."""


class Crash(BaseException):
    """The dispatcher process died (simulated). Not an Exception: nothing may catch it."""


@dataclass(frozen=True)
class CrashPlan:
    """Die ``when`` ("before" or "after") the ``nth`` call of ``operation`` in a tick."""

    operation: str
    when: str
    nth: int = 1

    def __str__(self) -> str:
        return f"{self.when} {self.operation} #{self.nth}"
