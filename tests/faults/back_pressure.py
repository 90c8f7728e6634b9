"""Invariant 6 as the harness sees it: a round sends out at most one receive batch of starts blind.

When `StartExecution` is throttled after botocore's retries, something else in the account
is spending the quota; a dispatcher that answers with a round of parallel starts makes it
worse for everyone. So, within each admission round (from its `BatchWriteItem` of start
records to the next one):

- at most one receive batch (10) of starts begin before any start of the round has come
  back without back-pressure (the first wave: nothing yet says starts succeed);
- at most one receive batch of starts begin after a start of the round came back with
  back-pressure (a throttle, or a 5xx, still failing after botocore's retries).

A start is a `StartExecution` or a `RedriveExecution` call as the dispatcher's client makes
it (botocore's ``before-call`` and ``after-call`` hooks: once per call, whatever its retries).
The second bound is one batch, not zero, because a start thread may begin a call in the
moment between another's throttle and the tick acting on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dispatcher.core.batching import SQS_BATCH_LIMIT

STARTS = frozenset({"states.StartExecution", "states.RedriveExecution"})
ROUND_BEGINS = "dynamodb.BatchWriteItem:record"
THROTTLE_CODES = frozenset({"ThrottlingException", "Throttling", "TooManyRequestsException"})
SERVER_ERROR = 500


def back_pressure(http_response: Any, parsed: dict[str, Any]) -> bool:
    """Whether a call's final answer is back-pressure for the tick: throttled, or a 5xx."""
    status = int(getattr(http_response, "status_code", 200))
    code = str(parsed.get("Error", {}).get("Code", ""))
    return status >= SERVER_ERROR or code in THROTTLE_CODES


@dataclass
class StartWaves:
    """Watches one invocation's starts, round by round; what broke invariant 6."""

    violations: list[str] = field(default_factory=list)
    rounds: int = 0
    began: int = 0
    """Starts of this round begun so far."""
    blind: int = 0
    """Starts of this round begun before any of its starts came back without back-pressure."""
    answered: bool = False
    after_throttle: int = 0
    """Starts of this round begun after one of its starts came back with back-pressure."""
    throttled: bool = False
    largest_blind_wave: int = 0

    def before(self, label: str) -> None:
        """A call is about to be sent."""
        if label == ROUND_BEGINS:
            # A round records its starts in parallel calls of 25, all before its first start.
            if self.began or not self.rounds:
                self.rounds += 1
            self.began = self.blind = self.after_throttle = 0
            self.answered = self.throttled = False
            return
        if label not in STARTS:
            return
        self.began += 1
        if self.throttled:
            self.after_throttle += 1
            if self.after_throttle == SQS_BATCH_LIMIT + 1:
                self.violations.append(
                    f"back-pressure: round {self.rounds} began more than {SQS_BATCH_LIMIT} starts"
                    " after a start came back throttled"
                )
        if not self.answered:
            self.blind += 1
            self.largest_blind_wave = max(self.largest_blind_wave, self.blind)
            if self.blind == SQS_BATCH_LIMIT + 1:
                self.violations.append(
                    f"back-pressure: round {self.rounds} began more than {SQS_BATCH_LIMIT} starts"
                    " before any came back"
                )

    def after(self, label: str, http_response: Any, parsed: dict[str, Any]) -> None:
        """A call's final answer (after botocore's retries) came back."""
        if label not in STARTS:
            return
        if back_pressure(http_response, parsed):
            self.throttled = True
        else:
            self.answered = True
