"""A lane's side of its rounds: its queue, its start rate, its dead letters, and `StartExecution`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dispatcher.core.admission import Admission, admit
from dispatcher.core.errors import TransientError
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.pacing import Pace
from dispatcher.core.tenants import admit_shared
from dispatcher.telemetry import logger
from dispatcher.tick.groups import GroupBook
from dispatcher.tick.ports import LanePorts, StartThreads
from dispatcher.tick.round import MemberRound, Prepared
from dispatcher.tick.starts import LaneStarts
from dispatcher.tick.warm import WarmState


class LaneRound(MemberRound):
    """One lane's side of its rounds in one tick: its queue, its start rate, its dead letters."""

    def __init__(
        self,
        ports: LanePorts,
        pool: StartThreads,
        *,
        warm: WarmState,
        books: Mapping[str, GroupBook] | None = None,
    ) -> None:
        super().__init__(ports, pool, warm=warm, books=books)
        self._lane = ports

    @property
    def state_machine_arn(self) -> str:
        """The state machine the lane starts."""
        return self._lane.state_machine.arn

    @property
    def rated(self) -> bool:
        """Whether the lane's starts are capped by a start rate."""
        return self._lane.rate is not None

    def pace(self) -> Pace:
        """Below `StartExecution`'s quota, the account's in the lane's region."""
        return self._warm.paces_for(self.state_machine_arn).start

    def decide(self, messages: Sequence[QueuedMessage], free: int) -> Admission:
        """Start in receive order up to the free slots, poison to the DLQ, the rest waits (`admit`).

        A lane that counts by message group holds a group's jobs at its limit, and with
        fair share gives the slots to the groups holding fewest first (`admit_shared`).
        """
        if self.book is None:
            return admit(messages, free)
        return admit_shared(messages, free, self.book.share, self.book.running)

    def within_rate(self, part: Prepared, now: float) -> None:
        """Cut the part's admission to the lane's start-rate tokens as of ``now`` (one conditional write).

        Taken once the round is about to start (its records and the starts follow at
        once), so the calls are as far apart as their tokens. What waits for the rate is
        released in order, never dead-lettered; a bucket that can't be read or written
        grants nothing and stops admitting until the next tick.
        """
        bucket = self._lane.rate
        wanted = len(part.admission.starts)
        if bucket is None or not wanted:
            return
        try:
            granted = bucket.take(wanted, now)
        except TransientError as error:
            part.outcome.stop_reason = f"could not take start-rate tokens: {error}"
            granted = 0
        if granted < wanted:
            logger.info("starts wait for the lane's rate", extra={"wanted": wanted, "granted": granted})
            part.outcome.rate_spent = part.outcome.stop_reason is None
            part.admission = self.decide(part.messages, granted)

    def _starts(self, part: Prepared, clock: Callable[[], float]) -> LaneStarts:
        lane, latency = self._lane, self._warm.start_latency
        return LaneStarts(
            lane.admissions,
            part.admission.starts,
            part.outcome,
            clock,
            latency,
            lane.name,
            roster=self.book is not None,
        )
