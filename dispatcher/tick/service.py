"""One invocation: take the tick lease, tick (count, then admit in rounds), hand the lease back.

Ticks never overlap: an invocation that can't take the lease notes the end it was told
about, asks the holder for one more tick, and returns at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from dispatcher.core.counting import free_slots
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.core.pacing import start_threads
from dispatcher.telemetry import logger
from dispatcher.tick.count import Counter
from dispatcher.tick.ports import Ports, Runtime
from dispatcher.tick.report import WAITING_STOPS, StopReason, TickReport
from dispatcher.tick.round import Round
from dispatcher.tick.warm import WarmState

LOOP_INTERVAL_SECONDS = 1.0
HAND_BACK_GRACE_SECONDS = 0.5
"""How long a holder whose tick filled every slot waits for another invocation to ask before
letting go, once others have asked: under churn, end batches come a few times a second,
and one holder ticking for them all reads the state table's window incrementally and its
own paces stay honest (two containers taking turns would each spend a pace of their own)."""
FIRST_GRACE_SECONDS = 0.1
"""The same wait before any other invocation asked (one `DeleteItem` after it, no polls)."""
ASK_POLL_SECONDS = 0.1
"""How often a waiting holder looks for an ask (a conditional `UpdateItem` each time)."""


@dataclass(frozen=True)
class TickPolicy:
    """The limits one invocation works within (from the settings and the control parameter)."""

    max_concurrency: int
    paused: bool = False
    """The operator paused the dispatcher: nothing starts, nothing is lost."""
    time_margin_seconds: float = 10.0
    """Stop admitting when less Lambda time than this remains (one round of starts)."""
    start_concurrency: int = 0
    """Message groups started at once; 0 sizes it from the `StartExecution` quota and latency."""
    list_reuse_seconds: float = 1.0
    """A `ListExecutions` read is reused by later ticks of a warm container for this long."""
    loop_seconds: float = 0.0
    """Keep ticking for up to this long while jobs wait for slots; 0 is one tick."""


class Dispatcher:
    """Starts at most ``MAX_CONCURRENCY - RUNNING`` executions per tick, in group order."""

    def __init__(
        self, policy: TickPolicy, ports: Ports, runtime: Runtime, warm: WarmState | None = None
    ) -> None:
        self._policy = policy
        self._max = policy.max_concurrency
        self._ports = ports
        self._runtime = runtime
        self._warm = warm or WarmState()
        self._counter = Counter(
            ports.default.state_machine,
            ports.default.state_table,
            self._warm,
            max_concurrency=policy.max_concurrency,
            list_reuse_seconds=policy.list_reuse_seconds,
            clock=runtime.clock,
        )

    def run(self, ended: Sequence[EndedExecution] = ()) -> TickReport:
        """Tick while holding the lease; with a loop policy, more while jobs wait and time remains."""
        if self._policy.paused or self._max == 0:
            logger.info("paused: nothing starts", extra={"max": self._max, "paused": self._policy.paused})
            return TickReport(stopped=StopReason.PAUSED)
        if ended:
            self._counter.note_ends(ended)
        owner = uuid.uuid4().hex
        try:
            if not self._take_lease(owner):
                return TickReport(stopped=StopReason.BUSY)
        except TransientError as error:
            # The write may have been applied with its answer lost: let go, or it expires.
            logger.warning("could not take the tick lease", extra={"reason": str(error)})
            self._let_go_after_failure(owner)
            return TickReport(stopped=StopReason.THROTTLED)
        self._counter.hold()
        try:
            report = self._ticks(ended)
            self._hand_back(owner, report)
        except BaseException:
            self._let_go_after_failure(owner)
            raise
        finally:
            self._counter.let_go()
        return report

    # -- the lease --------------------------------------------------------------------

    def _take_lease(self, owner: str) -> bool:
        lease = self._ports.lease
        now = self._runtime.clock()
        held_until = now + self._runtime.remaining_seconds()
        if lease.acquire(owner, now, held_until):
            return True
        if lease.ask_again(owner, now):
            logger.info("another tick holds the lease: it will tick again for this one, which returns")
            return False
        # The holder let go between the two calls.
        if lease.acquire(owner, now, held_until):
            return True
        logger.info("another tick took the lease: it counts after this invocation's news")
        return False

    def _hand_back(self, owner: str, report: TickReport) -> None:
        """Let go of the lease, first ticking again for each invocation that found it held.

        Those invocations came because executions ended (or a tick was due): their news
        is in the state table, and one more tick here, at once, spends the slots it freed.
        How often that happens is bounded by how often they come (the end-event mapping
        invokes at most twice at a time), and a listing is still read at most once a
        ``list_reuse_seconds``.
        """
        lease = self._ports.lease
        last = report.stopped
        churn = False  # whether other invocations have asked for ticks
        try:
            while True:
                asked = False
                if last is StopReason.CAPACITY and self._time_for_another_tick():
                    # Jobs wait for slots: rather than handing the lease to the next
                    # invocation, wait a moment for it to ask; under churn, take an ask
                    # that came during the tick at once, and wait longer for the next.
                    if churn:
                        asked = self._await_ask(owner)
                    else:
                        self._runtime.sleep(FIRST_GRACE_SECONDS)
                if not asked and lease.release(owner):
                    return
                churn = True
                if not self._time_for_another_tick():
                    lease.let_go(owner)
                    return
                tick = self.tick()
                last = tick.stopped
                report.add(tick)
        except TransientError as error:
            logger.warning(
                "could not let go of the tick lease: it expires with this invocation",
                extra={"reason": str(error)},
            )

    def _await_ask(self, owner: str) -> bool:
        """Whether another invocation asks for a tick within the grace (one that did already counts)."""
        waited = 0.0
        while not self._take_ask(owner):
            if waited >= HAND_BACK_GRACE_SECONDS - ASK_POLL_SECONDS / 2:
                return False
            self._runtime.sleep(ASK_POLL_SECONDS)
            waited += ASK_POLL_SECONDS
        return True

    def _take_ask(self, owner: str) -> bool:
        """Whether another tick was asked for; an answer lost may have taken one, so tick for it."""
        try:
            return self._ports.lease.take_ask(owner)
        except TransientError as error:
            logger.warning("could not read the lease's asks: ticking again", extra={"reason": str(error)})
            return True

    def _let_go_after_failure(self, owner: str) -> None:
        """Free the lease for the next tick; if that fails too, it expires with this invocation."""
        try:
            self._ports.lease.let_go(owner)
        except Exception as error:
            logger.warning("could not let go of the tick lease", extra={"reason": str(error)})

    # -- ticks ------------------------------------------------------------------------

    @property
    def _interval(self) -> float:
        return max(LOOP_INTERVAL_SECONDS, self._policy.list_reuse_seconds)

    def _time_for_another_tick(self) -> bool:
        return self._runtime.remaining_seconds() - self._interval > self._policy.time_margin_seconds

    def _ticks(self, ended: Sequence[EndedExecution]) -> TickReport:
        began = self._runtime.clock()
        report = self.tick(ended)
        while (
            report.stopped in WAITING_STOPS
            and self._runtime.clock() - began + self._interval < self._policy.loop_seconds
            and self._time_for_another_tick()
        ):
            self._runtime.sleep(self._interval)
            report.add(self.tick())
        return report

    def tick(self, ended: Sequence[EndedExecution] = ()) -> TickReport:
        """Count RUNNING, then admit up to the free slots from the queue, round after round."""
        try:
            self._counter.ensure_standard()
            count = self._counter.count(ended)
        except TransientError as error:
            # Without a count nothing may start; the next tick tries again.
            logger.warning("could not count RUNNING executions", extra={"reason": str(error)})
            return TickReport(stopped=StopReason.THROTTLED)
        free = free_slots(self._max, count.running)
        report = TickReport(
            running=count.running,
            free=free,
            stopped=StopReason.CAPACITY,
            oldest_running_seconds=count.oldest_running_seconds,
        )
        logger.info("capacity", extra={"running": count.running, "free": free, "max": self._max})
        with self._runtime.pool(self._start_threads()) as pool:
            rounds = Round(self._ports.default, pool, self._runtime, self._warm)
            while free > 0:
                stopped = self._round(rounds, free, report)
                if stopped is not None:
                    report.stopped = stopped
                    break
                free = report.free - report.started
        return report

    def _start_threads(self) -> int:
        if self._policy.start_concurrency:
            return self._policy.start_concurrency
        pace = self._warm.paces_for(self._ports.default.state_machine.arn).start
        return start_threads(pace.rate, self._warm.start_latency.seconds)

    def _round(self, rounds: Round, free: int, report: TickReport) -> StopReason | None:
        """One round; why admission stops after it, or None to go on."""
        if self._runtime.remaining_seconds() < self._policy.time_margin_seconds:
            return StopReason.TIME
        try:
            messages, receive_stop = rounds.receive(free)
        except TransientError as error:
            logger.warning("could not receive", extra={"reason": str(error)})
            return StopReason.THROTTLED
        if not messages:
            return StopReason.DRAINED
        outcome = rounds.admit(messages, free)
        rounds.settle(outcome, report)
        rounds.forget_never_started(outcome)
        stop_reason = outcome.stop_reason or receive_stop
        if stop_reason is not None:
            logger.warning("stopped admitting", extra={"reason": stop_reason})
            return StopReason.THROTTLED
        if not (outcome.started or outcome.already_started or outcome.dead_letters):
            # Everything received waits (e.g. a redrive job whose execution no read
            # shows yet, and its group): receiving again would hand back the same.
            return StopReason.WAITING
        return None
