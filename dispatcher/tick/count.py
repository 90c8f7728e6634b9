"""The count: how many executions hold a slot, from Step Functions and the state table.

`ListExecutions` is eventually consistent both ways, so the list is corrected with what
the state table remembers: starts recorded in the last 90 s that the list doesn't show
yet, and ends that status change events reported while the list still shows them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS, latest_ends, plan_count, still_counts
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.telemetry import logger
from dispatcher.tick.ports import Executions, StateStore
from dispatcher.tick.warm import WarmState


@dataclass(frozen=True)
class Count:
    """RUNNING as one tick counted it."""

    running: int
    oldest_running_seconds: float | None = None
    """Age of the oldest listed execution (when the listing was complete)."""


class Counter:
    """Counts the executions of one state machine that hold a slot, at most MAX of them."""

    def __init__(  # noqa: PLR0913 — each is one input of the count
        self,
        state_machine: Executions,
        state_table: StateStore,
        warm: WarmState,
        *,
        max_concurrency: int,
        list_reuse_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self._state_machine = state_machine
        self._state = state_table
        self._warm = warm
        self._max = max_concurrency
        self._list_reuse_seconds = list_reuse_seconds
        self._clock = clock

    def note_ends(self, ended: Sequence[EndedExecution]) -> None:
        """Keep the events' news for the ticks of the next minute and a half."""
        logger.info(
            "executions ended",
            extra={"executions": [(end.name, end.stopped_at) for end in ended]},
        )
        try:
            left = self._state.note_ended(ended, self._clock())
        except TransientError as error:
            left, reason = len(ended), str(error)
        else:
            reason = "the state table left them unprocessed"
        if left:
            # This tick still uses the news; later ticks count those executions until the
            # list stops showing them, which is safe.
            logger.warning("could not record every end", extra={"left": left, "reason": reason})

    def ensure_standard(self) -> None:
        """Refuse an EXPRESS (or missing) state machine; a warm container checks once."""
        arn = self._state_machine.arn
        if arn not in self._warm.standard:
            self._state_machine.ensure_standard()
            self._warm.standard.add(arn)

    def count(self, ended: Sequence[EndedExecution] = ()) -> Count:
        """RUNNING: the list, less executions known to have ended, plus recorded starts it doesn't show."""
        now = self._clock()
        window = self._state.window(now - RECENT_START_WINDOW_SECONDS)
        ends = latest_ends([*window.ended, *ended])
        arn = self._state_machine.arn
        listing = self._warm.listing(arn, now, self._list_reuse_seconds)
        if listing is None:
            listing = self._state_machine.list_running(self._max, ends, listed_at=now)
            self._warm.keep(arn, listing)
        planned = plan_count(listing, ends, window.starts, self._max, now)
        oldest = None
        if listing.complete and listing.oldest_started_at is not None:
            oldest = round(max(0.0, now - listing.oldest_started_at), 3)
        running = planned.running
        resolved = list(planned.resolved)
        for index, record in enumerate(planned.to_check):
            if running >= self._max:
                break
            try:
                state = self._state_machine.state_of(record.name)
            except TransientError as error:
                # Unknown means running: the cap never depends on a read that failed.
                running += len(planned.to_check) - index
                logger.warning("could not check recorded starts", extra={"reason": str(error)})
                break
            if state is None:
                counts = still_counts(None, record, now)
            else:
                counts = still_counts(state.status, record, now, state.redrive_count)
            if counts:
                running += 1
            else:
                resolved.append(record)
        if resolved:
            self._state.forget(resolved)
        return Count(running, oldest)
