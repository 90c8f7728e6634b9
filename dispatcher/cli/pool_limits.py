"""Adaptive pools' limits as the CLI reads and writes them: `status` shows L; `reset-limit`, `set-max` set it.

L lives in the state table (`dispatcher.adapters.limit_items`); a write here is made on
the same condition as a tick's (the version read), so a tick's change made meanwhile is
never overwritten unseen: the write is made again from a fresh read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.cli.config import Aws, Resources, control_parameter
from dispatcher.cli.errors import CliError
from dispatcher.core.adaptive import LimitState, limit_of
from dispatcher.core.control import Control, steer
from dispatcher.core.topology import Pool, Topology

WRITE_ATTEMPTS = 3


@dataclass(frozen=True)
class LimitChange:
    """What a write did to a pool's limit."""

    pool: str
    before: int
    after: int
    max_concurrency: int


def environment_max(resources: Resources, read: Control | None) -> int:
    """The environment's MAX for pool default: its own, unless the parameter overrides it."""
    if read is None or read.max_concurrency is None:
        return resources.environment_max()
    return resources.max_concurrency or 0  # overridden by the parameter


def live_topology(aws: Aws, resources: Resources) -> Topology:
    """Every pool as the ticks steer it now: ``LANES`` with the control parameter's overrides."""
    control = control_parameter(aws, resources)
    read = None if control is None else control.read()
    return steer(resources.topology(environment_max(resources, read)), read, resources.control_parameter)


def ledger_of(aws: Aws, resources: Resources, topology: Topology) -> StartLedgerTable | None:
    """The state table's ledger, where the limits live (None: no state table configured)."""
    if not resources.state_table:
        return None
    return StartLedgerTable(
        aws.client("dynamodb"), resources.state_table, topology.default_lane.state_machine_arn
    )


def with_limits(topology: Topology, ledger: StartLedgerTable | None) -> Topology:
    """``topology`` with each adaptive pool's limit as kept (MAX when none is, or no table is known)."""
    pools = tuple(
        pool
        if pool.adaptive is None
        else replace(
            pool,
            limit=limit_of(
                None if ledger is None else ledger.limit(pool.name), pool.adaptive, pool.max_concurrency
            ),
        )
        for pool in topology.pools
    )
    return replace(topology, pools=pools)


def change_limit(
    ledger: StartLedgerTable,
    pool: Pool,
    change: Callable[[LimitState | None, float], LimitState | None],
    clock: Callable[[], float],
) -> LimitChange:
    """Write ``change`` of ``pool``'s kept limit (None: nothing to write), on the version read.

    ``change`` is given the time by the table's clock as it was read (``clock`` when the
    response doesn't say): a reset forgets what ended before it by AWS's time, not this machine's.
    """
    assert pool.adaptive is not None  # noqa: S101 — callers pass adaptive pools
    for _ in range(WRITE_ATTEMPTS):
        kept, read_at = ledger.limit_read(pool.name)
        now = clock() if read_at is None else read_at
        before = limit_of(None, pool.adaptive, pool.max_concurrency) if kept is None else kept.limit
        changed = change(kept, now)
        if changed is None:
            return LimitChange(pool.name, before, before, pool.max_concurrency)
        if ledger.record_limit(pool.name, changed, kept, now):
            return LimitChange(
                pool.name,
                before,
                limit_of(changed, pool.adaptive, pool.max_concurrency),
                pool.max_concurrency,
            )
    raise CliError(f"pool {pool.name}'s limit kept changing while it was written: try again")
