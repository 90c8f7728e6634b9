"""The one emulation of RedriveExecution (moto has none): AWS's rules, on any store of executions."""

from __future__ import annotations

from dispatcher.core.executions import CLIENT_TOKEN_SECONDS, REDRIVE_WINDOW_SECONDS
from dispatcher.local.redrive import Redrives, Stopped

NOW = 1_800_000_000.0
ARN = "arn:aws:states:us-east-1:123456789012:execution:jobs:order-1"


class Store:
    """One execution, and the redrives it was given."""

    def __init__(self, status: str = "FAILED", stopped_at: float | None = NOW - 60) -> None:
        self.execution: Stopped | None = Stopped(status, stopped_at)
        self.runs_again: list[str] = []

    def stopped(self, arn: str) -> Stopped | None:
        """The execution, if ``arn`` names it."""
        return self.execution if arn == ARN else None

    def run_again(self, arn: str) -> None:
        """Note a redrive."""
        self.runs_again.append(arn)


def test_a_failure_runs_again_and_its_token_answers_as_before_for_15_minutes() -> None:
    """A FAILED execution is redriven once; the same client token within 15 minutes redrives nothing."""
    store, redrives = Store(), Redrives()
    first = redrives.redrive(ARN, "token-1", NOW, store.stopped, store.run_again)
    assert (first.ok, first.repeated, first.document) == (True, False, {"redriveDate": NOW})
    again = redrives.redrive(ARN, "token-1", NOW + CLIENT_TOKEN_SECONDS - 1, store.stopped, store.run_again)
    assert (again.ok, again.repeated, again.document) == (True, True, {"redriveDate": NOW})
    assert store.runs_again == [ARN]
    later = redrives.redrive(ARN, "token-1", NOW + CLIENT_TOKEN_SECONDS, store.stopped, store.run_again)
    assert (later.ok, later.repeated) == (True, False)
    assert store.runs_again == [ARN, ARN]


def test_only_a_recent_failure_can_be_redriven() -> None:
    """Succeeded, running, unknown or stopped more than 14 days ago: refused, and nothing runs again."""
    cases = {
        "ExecutionNotRedrivable": [Store("SUCCEEDED"), Store("RUNNING", None)],
        "ExecutionDoesNotExist": [Store()],
    }
    for code, stores in cases.items():
        for store in stores:
            arn = ARN if code != "ExecutionDoesNotExist" else ARN + "-gone"
            answer = Redrives().redrive(arn, None, NOW, store.stopped, store.run_again)
            assert (answer.status, answer.document["__type"]) == (400, code)
            assert store.runs_again == []
    old = Store("TIMED_OUT", NOW - REDRIVE_WINDOW_SECONDS - 1)
    answer = Redrives().redrive(ARN, None, NOW, old.stopped, old.run_again)
    assert answer.document == {
        "__type": "ExecutionNotRedrivable",
        "message": "Execution stopped more than 14 days ago",
    }
    assert old.runs_again == []
    recent = Store("ABORTED", NOW - REDRIVE_WINDOW_SECONDS)
    assert Redrives().redrive(ARN, None, NOW, recent.stopped, recent.run_again).ok
