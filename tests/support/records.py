"""Records a test writes itself: a ledger's starts of its own state machine, as a tick would record them."""

from __future__ import annotations

from collections.abc import Mapping

from dispatcher.core.counting import LedgerRequest, LedgerStart
from dispatcher.tick.ports import StartLedger


def starts_at(
    ledger: StartLedger, groups: Mapping[str, str], now: float, redrives: Mapping[str, int] | None = None
) -> list[LedgerStart]:
    """The starts ``ledger.record`` writes for its key's state machine's executions (name → group) at ``now``.

    ``redrives``: name → redriveCount before, for the executions redriven rather than started.
    """
    return ledger.starts_of([LedgerRequest("", groups, redrives or {})], now)[0]
