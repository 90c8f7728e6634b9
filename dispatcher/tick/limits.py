"""Each adaptive pool's limit L in a tick: read with the window, moved by the pool's ends, written once.

The tick counts, then folds the ends it knows of each adaptive pool's members (the status
change events' and `DescribeExecution`'s, each with its error) into the pool's limit
(`dispatcher.core.adaptive.adapt`), and plans with L in place of MAX. The limit's item
came with the window's read; a change is one conditional `PutItem`. A write that another
writer beat (`dispatcher reset-limit`, a tick of another invocation) is made again once
from a fresh read; one that still fails, or can't be made, leaves this tick the lower of
the two limits, and the ends to a later tick (each is counted once, whenever).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from dispatcher.core.adaptive import Adaptation, Adaptive, LimitState, PoolEnd, adapt, limit_of, reset
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.core.topology import Pool, Topology
from dispatcher.telemetry import logger
from dispatcher.tick.ports import LimitRecords

WRITE_ATTEMPTS = 2


class Limits:
    """The adaptive pools' limits of one invocation's ticks."""

    def __init__(self, records: LimitRecords, clock: Callable[[], float]) -> None:
        self._records = records
        self._clock = clock

    def adapt(
        self,
        topology: Topology,
        pools: Sequence[Pool],
        stored: Mapping[str, LimitState],
        ends: Mapping[str, Sequence[EndedExecution]],
        running: Mapping[str, int],
    ) -> list[Pool]:
        """``pools``, each adaptive one with its limit after this tick's ends.

        ``stored``: each pool's limit as the window read it; ``ends``: each state machine's
        ends this tick knows; ``running``: each pool's RUNNING, as the tick counted it.
        """
        steered = []
        for pool in pools:
            state = stored.get(pool.name)
            if pool.adaptive is None:
                if state is not None and state.limit != pool.max_concurrency:
                    self._turned_off(pool, state)
                steered.append(pool)
                continue
            machines = {member.state_machine_arn for member in topology.members_of(pool.name)}
            limit, floor_since = self._adapted(
                pool,
                pool.adaptive,
                state,
                [end for arn in machines for end in ends.get(arn, ())],
                running[pool.name],
            )
            floor = None if floor_since is None else max(0.0, self._clock() - floor_since)
            steered.append(replace(pool, limit=limit, floor_seconds=floor))
        return steered

    def _adapted(
        self,
        pool: Pool,
        adaptive: Adaptive,
        state: LimitState | None,
        ends: Iterable[EndedExecution],
        running: int,
    ) -> tuple[int, float | None]:
        """L after the pool's ends, written when it changed; and since when it has sat at its lowest."""
        pool_ends = [PoolEnd(end.name, end.stopped_at, end.error) for end in ends]
        fallback = limit_of(state, adaptive, pool.max_concurrency)
        for attempt in range(WRITE_ATTEMPTS):
            now = self._clock()
            adaptation = adapt(
                state,
                adaptive,
                max_concurrency=pool.max_concurrency,
                ends=pool_ends,
                running=running,
                now=now,
            )
            limit = limit_of(adaptation.state, adaptive, pool.max_concurrency)
            floor_since = adaptation.state.floor_since
            if not adaptation.changed:
                return limit, floor_since
            try:
                if self._records.record_limit(pool.name, adaptation.state, state, now):
                    _log(pool, adaptation, running)
                    return limit, floor_since
                if attempt + 1 < WRITE_ATTEMPTS:
                    state = self._records.limit(pool.name)
                    fallback = min(fallback, limit_of(state, adaptive, pool.max_concurrency))
            except TransientError as error:
                logger.warning(
                    "could not keep the pool's limit: this tick uses the lower one",
                    extra={"pool": pool.name, "reason": str(error)},
                )
                return min(fallback, limit), None
            fallback = min(fallback, limit)
        logger.warning("another writer changed the pool's limit meanwhile", extra={"pool": pool.name})
        return fallback, None

    def _turned_off(self, pool: Pool, state: LimitState) -> None:
        """``adaptive`` was taken away: its limit goes back to MAX, so turning it on again starts there."""
        try:
            written = self._records.record_limit(
                pool.name, reset(state, pool.max_concurrency, self._clock()), state, self._clock()
            )
        except TransientError as error:
            logger.warning(
                "could not reset the pool's limit", extra={"pool": pool.name, "reason": str(error)}
            )
            return
        if written:
            logger.info("adaptive is off: the pool's limit is its MAX again", extra={"pool": pool.name})


def _log(pool: Pool, adaptation: Adaptation, running: int) -> None:
    """Each cut with the signal that caused it; growth and ignored signals in one line."""
    for cut in adaptation.decreases:
        logger.warning(
            "throttled: the pool's limit is cut",
            extra={
                "pool": pool.name,
                "execution": cut.execution,
                "error": cut.error,
                "limit_before": cut.before,
                "limit": cut.after,
                "max": pool.max_concurrency,
            },
        )
    if adaptation.increases or adaptation.ignored:
        logger.info(
            "the pool's limit",
            extra={
                "pool": pool.name,
                "limit": adaptation.state.limit,
                "raised_by": adaptation.increases,
                "signals_in_cooldown": list(adaptation.ignored),
                "running": running,
            },
        )
