"""Keeping the sizes of a round's sized jobs (`dispatcher.core.sizes`) before they start.

A round writes each pool's sized starts as one pack, before the calls, and in the same
`BatchWriteItem` deletes the packs whose executions this tick knows all ended. A write that
fails leaves those jobs unstarted (they wait, in order, as a start record left unprocessed
does): a sized execution Step Functions runs but the dispatcher can't weigh would
over-commit its pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dispatcher.core.admission import Cancelled
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS, Count
from dispatcher.core.errors import TransientError
from dispatcher.core.sizes import SizeEntry, size_key, stale_keys, stale_packs
from dispatcher.core.topology import Lane, Topology
from dispatcher.telemetry import logger
from dispatcher.tick.ports import SizeRecords
from dispatcher.tick.starts import MemberStarts

PACKS_GONE_PER_WRITE = 24
"""Ended packs one write deletes at most (beside its own pack: `BatchWriteItem` takes 25)."""


def stale_sizes(
    topology: Topology,
    sizes: Mapping[str, Mapping[str, SizeEntry]],
    counts: Mapping[str, Count],
    now: float,
) -> dict[str, list[str]]:
    """Each pool's packs whose executions this tick's count knows all not to run (`stale_packs`).

    Only an entry older than twice the review window counts as ended: a listing may be
    reused for a while, and a start may not show for a minute.
    """
    stale: dict[str, list[str]] = {}
    for pool, entries in sizes.items():
        counted = {
            lane.state_machine_arn: counts[lane.state_machine_arn].names
            for lane in topology.members_of(pool, Lane)
            if lane.state_machine_arn in counts
        }
        packs = stale_packs(entries, stale_keys(entries, counted, now - 2 * RECENT_START_WINDOW_SECONDS))
        if packs:
            stale[pool] = packs[:PACKS_GONE_PER_WRITE]
    return stale


class SizeKeeper:
    """Writes a round's sized starts as their pools' packs before the calls."""

    def __init__(
        self,
        records: SizeRecords | None,
        pool_of: Mapping[str, str],
        stale: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """``pool_of``: member → its pool; ``stale``: each pool's ended packs to delete with a write."""
        self._records = records
        self._pool_of = pool_of
        self._stale = dict(stale or {})

    def keep(
        self, members: Sequence[tuple[str, str | None, MemberStarts]], now: float
    ) -> dict[int, set[str]]:
        """Write the sized starts of ``members`` (name, state machine it starts, starts), pool by pool.

        The names that may not start, by their `MemberStarts`' id.
        """
        added: dict[str, dict[str, SizeEntry]] = {}
        owners: dict[str, list[tuple[MemberStarts, str]]] = {}
        for member, arn, starts in members:
            for start in starts.starts:
                if start.slots > 1 and not isinstance(start, Cancelled) and arn is not None:
                    pool = self._pool_of[member]
                    added.setdefault(pool, {})[size_key(arn, start.name)] = SizeEntry(start.slots, now)
                    owners.setdefault(pool, []).append((starts, start.name))
        refused: dict[int, set[str]] = {}
        for pool, entries in added.items():
            if self._write(pool, entries):
                continue
            for starts, name in owners[pool]:
                refused.setdefault(id(starts), set()).add(name)
        return refused

    def _write(self, pool: str, entries: Mapping[str, SizeEntry]) -> bool:
        """One pool's write; whether it was made."""
        if self._records is None:
            return False
        try:
            self._records.record_sizes(pool, entries, self._stale.get(pool, ()))
        except TransientError as error:
            logger.warning(
                "could not keep the sizes of sized jobs: they wait",
                extra={"pool": pool, "reason": str(error)},
            )
            return False
        self._stale.pop(pool, None)
        return True
