"""One invocation: take the tick lease, tick (`Ticker`: count, adapt, plan, spend, report), hand it back.

Ticks never overlap: an invocation that can't take the lease notes the end it was told
about, asks the keeper for one more tick, and returns at once (`LeaseKeeper`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution, Release
from dispatcher.core.member_queues import members_of
from dispatcher.core.topology import Topology
from dispatcher.telemetry import logger
from dispatcher.tick.count import Records
from dispatcher.tick.keeper import LeaseKeeper
from dispatcher.tick.policy import TickPolicy
from dispatcher.tick.ports import Ports, Runtime
from dispatcher.tick.report import (
    StopReason,
    TickReport,
    stopped_report,
)
from dispatcher.tick.ticking import Ticker
from dispatcher.tick.warm import WarmState


class Dispatcher:
    """One invocation: take the tick lease, tick while jobs wait and time remains, hand it back."""

    def __init__(
        self,
        policy: TickPolicy,
        ports: Ports,
        runtime: Runtime,
        warm: WarmState | None = None,
        steer: Callable[[], Topology] | None = None,
    ) -> None:
        """The service of one invocation.

        ``steer``: every pool and lane with their live limits, read again (the control
        parameter, through its cache) for each tick after the invocation's first.
        """
        self._policy = policy
        self._steer = steer
        self._ticked = False
        self._ports = ports
        self._runtime = runtime
        self._records = Records(ports.reads, ports.ledger, ports.member_queues, members_of(policy.topology))
        self._ticker = Ticker(policy, ports, runtime, warm or WarmState(), self._records)

    def run(
        self,
        ended: Sequence[EndedExecution] = (),
        releases: Sequence[Release] = (),
        wake_until: float | None = None,
    ) -> TickReport:
        """Tick while holding the lease; with a loop policy, more while jobs wait and time remains.

        ``releases``: executions that say they left a member (a gate): their places are freed first,
        whether or not anything may start. ``wake_until``: what producers queued until then
        must be received (`next_tick_in`).
        """
        self._ticker.left(releases)
        if not self._ticker.active_pools:
            default = self._ticker.topology.default_pool
            logger.info(
                "paused: nothing starts",
                extra={"max": default.max_concurrency, "paused": default.paused},
            )
            return self._stopped(StopReason.PAUSED)
        self._note_ends(ended)
        keeper = LeaseKeeper(self._ports.lease, self._runtime, uuid.uuid4().hex)
        try:
            if not keeper.take(wake_until):
                return self._stopped(StopReason.BUSY)
        except TransientError as error:
            # The write may have been applied with its answer lost: let go, or it expires.
            logger.warning("could not take the tick lease", extra={"reason": str(error)})
            keeper.let_go_after_failure()
            return self._stopped(StopReason.THROTTLED)
        self._records.lease_taken()
        try:
            report = self._ticks(ended, wake_until)
            keeper.hand_back(report, self.tick, self._time_for_another_tick, self._ticker.rate_due)
        except BaseException:
            keeper.let_go_after_failure()
            raise
        finally:
            self._records.lease_ended()
        return report

    def _stopped(self, reason: StopReason) -> TickReport:
        """The report of a tick that stopped before counting (`stopped_report`)."""
        return stopped_report(self._ticker.topology, reason)

    def _note_ends(self, ended: Sequence[EndedExecution]) -> None:
        """Write the ends of the state machines it counts to the records: every machine's in one item."""
        ends = [end for ends in self._ticker.ends_by_machine(ended).values() for end in ends]
        if ends:
            self._records.note_ends(ends, self._runtime.clock())

    def _time_for_another_tick(self) -> bool:
        return self._runtime.remaining_seconds() - self._policy.interval > self._policy.time_margin_seconds

    def _ticks(self, ended: Sequence[EndedExecution], wake_until: float | None) -> TickReport:
        began = self._runtime.clock()
        report = self.tick(ended)
        while (
            wait := self._policy.next_tick_in(report.stopped, began, self._runtime, wake_until)
        ) is not None:
            self._runtime.sleep(wait)
            report.add(self.tick())
        return report

    def tick(self, ended: Sequence[EndedExecution] = ()) -> TickReport:
        """One tick within the live limits (read again after the invocation's first): `Ticker.tick`."""
        if not self._steer_again():
            return self._stopped(StopReason.THROTTLED)
        pools = self._ticker.active_pools
        if not pools:
            logger.info("paused: nothing starts")
            return self._stopped(StopReason.PAUSED)
        return self._ticker.tick(pools, ended)

    def _steer_again(self) -> bool:
        """Read the live limits again for a tick after the invocation's first; False when they can't be."""
        if self._ticked and self._steer is not None:
            try:
                self._ticker.steered(self._steer())
            except TransientError as error:
                # Whether the operator paused is unknown: start nothing this tick.
                logger.warning("could not read the control parameter", extra={"reason": str(error)})
                return False
        self._ticked = True
        return True
