"""What AWS's eventually consistent reads show of a world's executions (`World` reads through these).

`ListExecutions` and `DescribeExecution` lag behind the truth as the world's `Lag` says;
`RedriveExecution` goes by the truth itself.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from typing import TYPE_CHECKING

from dispatcher.core.executions import state_machine_of
from dispatcher.local.redrive import Stopped

if TYPE_CHECKING:
    from tests.support.plans import FaultPlan
    from tests.support.runs import Execution, Run


class LaggingReads:
    """`World`'s reads as AWS answers them: the list and the describe lag, the truth doesn't."""

    faults: FaultPlan
    lag_rng: random.Random
    executions: dict[str, Execution]
    _open: dict[str, Execution]
    _open_in: defaultdict[str, dict[str, Execution]]
    _ended: deque[tuple[float, str]]

    @property
    def now(self) -> float:
        """The world's time."""
        raise NotImplementedError

    def _stale_delay(self, fixed: float, bound: float) -> float:
        return self.lag_rng.uniform(0, bound) if self.faults.lag.flaky else fixed

    def _listed(self, run: Run) -> bool:
        lag = self.faults.lag
        if run.started_at + self._stale_delay(run.appear_after, lag.start) > self.now:
            return False
        return run.ended_at is None or run.ended_at + self._stale_delay(run.vanish_after, lag.end) > self.now

    def listed_running(self, machine: str | None = None) -> list[tuple[Execution, float | None]]:
        """What an eventually consistent `ListExecutions(RUNNING)` returns now, newest first.

        Each listed execution comes with the redriveDate the list shows: the latest
        run's once the list has caught up with it, none while it still shows an earlier
        run that has ended (the end lag). ``machine``: of that state machine only.
        """
        lag_end = self.faults.lag.end
        while self._ended and self._ended[0][0] + lag_end <= self.now:
            self._ended.popleft()  # gone from every read, however late
        ended = {arn: self.executions[arn] for _, arn in self._ended}
        if machine is None:
            candidates = ended | self._open
        else:
            mine = {arn: execution for arn, execution in ended.items() if state_machine_of(arn) == machine}
            candidates = mine | self._open_in[machine]
        listed = []
        for execution in sorted(candidates.values(), key=lambda execution: execution.sequence):
            shown = [run for run in execution.runs if self._listed(run)]
            if shown:
                redriven_at = None if shown[-1] is execution.runs[0] else shown[-1].started_at
                listed.append((execution, redriven_at))
        return sorted(listed, key=lambda item: -item[0].sequence)

    def described(self, arn: str) -> tuple[str, int] | None:
        """What an eventually consistent `DescribeExecution` says: status and redriveCount, or None (missing).

        A redrive shows once the start lag of its run has passed; until then the read
        shows the run before it.
        """
        execution = self.executions.get(arn)
        if execution is None:
            return None
        lag = self.faults.lag
        if execution.started_at + self._stale_delay(execution.describe_after, lag.describe) > self.now:
            return None
        index = len(execution.runs) - 1
        while index > 0 and (
            execution.runs[index].started_at
            + self._stale_delay(execution.runs[index].appear_after, lag.start)
            > self.now
        ):
            index -= 1
        run = execution.runs[index]
        if run.ended_at is None or run.ended_at + self._stale_delay(run.vanish_after, lag.end) > self.now:
            return "RUNNING", index
        return run.status, index

    def truly(self, arn: str) -> tuple[str, int] | None:
        """Status and redriveCount as they are (what `RedriveExecution` itself goes by)."""
        execution = self.executions.get(arn)
        if execution is None:
            return None
        run = execution.runs[-1]
        return ("RUNNING" if run.ended_at is None else run.status), len(execution.runs) - 1

    def stopped(self, arn: str) -> Stopped | None:
        """Status and stop time as they are (what `RedriveExecution` goes by); None: no such execution."""
        execution = self.executions.get(arn)
        if execution is None:
            return None
        run = execution.runs[-1]
        return Stopped("RUNNING" if run.ended_at is None else run.status, run.ended_at)
