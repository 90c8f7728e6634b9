"""The tick lease as one invocation holds it: taken before counting, handed back with a grace.

Ticks never overlap: an invocation that can't take the lease asks the keeper for one more
tick and returns at once. A keeper whose tick filled every slot waits a moment before
letting go, for another invocation to ask, and ticks again for each one that did.
"""

from __future__ import annotations

from collections.abc import Callable

from dispatcher.core.errors import TransientError
from dispatcher.core.events import Ask
from dispatcher.telemetry import logger
from dispatcher.tick.ports import Lease, Runtime
from dispatcher.tick.report import StopReason, TickReport

HAND_BACK_GRACE_SECONDS = 0.5
"""How long a keeper whose tick filled every slot waits for another invocation to ask before
letting go, once others have asked: under churn, end batches come a few times a second,
and one keeper ticking for them all reads the state table's window incrementally and its
own paces stay honest (two containers taking turns would each spend a pace of their own)."""
FIRST_GRACE_SECONDS = 0.1
"""The same wait before any other invocation asked (one `DeleteItem` after it, no polls)."""
ASK_POLL_SECONDS = 0.1
"""How often a waiting keeper looks for an ask (a conditional `UpdateItem` each time)."""
RATE_WAIT_SECONDS = 0.05, 1.0
"""While a lane's jobs wait only for its start rate, the keeper ticks again when its next token
is due: at least this long after the last tick, and looking for an ask at least this often
meanwhile (a slow rate's token may be many seconds away)."""


class LeaseKeeper:
    """One invocation's hold on the tick lease, under one owner id."""

    def __init__(self, lease: Lease, runtime: Runtime, owner: str) -> None:
        self._lease = lease
        self._runtime = runtime
        self._owner = owner
        self._wake_until: float | None = None
        """The newest wake second of the asks taken and not yet ticked past."""

    def take(self, wake_until: float | None = None) -> bool:
        """Take the lease; False when another invocation holds it (and was asked for one more tick).

        ``wake_until``: this invocation came for wakes (`wake_deadline`); the ask carries it,
        so the keeper's tick for it receives what their producers queued until then.
        """
        lease, owner = self._lease, self._owner
        now = self._runtime.clock()
        held_until = now + self._runtime.remaining_seconds()
        if lease.acquire(owner, now, held_until):
            return True
        if lease.ask_again(owner, now, wake_until):
            logger.info("another tick holds the lease: it will tick again for this one, which returns")
            return False
        # The keeper let go between the two calls.
        if lease.acquire(owner, now, held_until):
            return True
        logger.info("another tick took the lease: it counts after this invocation's news")
        return False

    def hand_back(
        self,
        report: TickReport,
        tick: Callable[[], TickReport],
        time_for_another_tick: Callable[[], bool],
        rate_due: Callable[[], float | None] = lambda: None,
    ) -> None:
        """Let go of the lease, first ticking again (``tick``) for each invocation that found it held.

        Those invocations came because executions ended (or a tick was due): their news
        is in the state table, and one more tick here, at once, spends the slots it freed.
        How often that happens is bounded by how often they come (the end-event mapping
        invokes at most twice at a time), and a listing is still read at most once a
        ``list_reuse_seconds``. While a lane's jobs wait only for its start rate
        (``rate_due``: seconds until its next token, None when none waits), the keeper
        ticks again when the token is due, or at an ask before. An ask that came for
        wakes whose tick drains before their second has passed ticks once more when it
        has (as `TickPolicy.next_tick_in` does for the keeper's own wakes).
        """
        lease, owner = self._lease, self._owner
        last = report.stopped
        churn = False  # whether other invocations have asked for ticks
        try:
            while True:
                asked = self._wait_for_cause(last, churn, rate_due, time_for_another_tick)
                if not asked and self._noted(lease.let_go_unless_asked(owner)) is None:
                    return
                churn = True
                if not time_for_another_tick():
                    lease.let_go(owner)
                    return
                again = tick()
                last = again.stopped
                report.add(again)
        except TransientError as error:
            logger.warning(
                "could not let go of the tick lease: it expires with this invocation",
                extra={"reason": str(error)},
            )

    def _wait_for_cause(
        self,
        last: StopReason,
        churn: bool,
        rate_due: Callable[[], float | None],
        time_for_another_tick: Callable[[], bool],
    ) -> bool:
        """Wait for a cause to tick again after a tick that stopped ``last``; True: one came for sure.

        A token due to a lane that waits only for its rate, or the second of the wakes its
        tick drained before: it ticks then. Jobs that wait for slots: rather than handing
        the lease to the next invocation, it waits a moment for it to ask; under churn, it
        takes an ask that came during the tick at once, and waits longer for the next.
        """
        due = rate_due() if last is StopReason.CAPACITY else None
        wake = self._wake_wait() if last is StopReason.DRAINED else None
        if due is not None and time_for_another_tick():
            self._await_token(due)
            return True
        if wake is not None and time_for_another_tick():
            self._runtime.sleep(wake)
            self._wake_until = None
            return True
        if last is StopReason.CAPACITY and time_for_another_tick():
            if churn:
                return self._await_ask()
            self._runtime.sleep(FIRST_GRACE_SECONDS)
        return False

    def _await_token(self, due: float) -> None:
        """Wait ``due`` seconds for a lane's next token, or less if another invocation asks meanwhile."""
        shortest, longest = RATE_WAIT_SECONDS
        left = max(shortest, due)
        while left > longest:
            self._runtime.sleep(longest)
            left -= longest
            if self._take_ask():
                return
        self._runtime.sleep(left)

    def _await_ask(self) -> bool:
        """Whether another invocation asks for a tick within the grace (one that did already counts)."""
        waited = 0.0
        while not self._take_ask():
            if waited >= HAND_BACK_GRACE_SECONDS - ASK_POLL_SECONDS / 2:
                return False
            self._runtime.sleep(ASK_POLL_SECONDS)
            waited += ASK_POLL_SECONDS
        return True

    def _take_ask(self) -> bool:
        """Whether another tick was asked for; an answer lost may have taken one, so tick for it."""
        try:
            return self._noted(self._lease.take_ask(self._owner)) is not None
        except TransientError as error:
            logger.warning("could not read the lease's asks: ticking again", extra={"reason": str(error)})
            return True

    def _noted(self, ask: Ask | None) -> Ask | None:
        """Keep an ask's wake second (the newest of those taken) for `_wake_wait`."""
        if ask is not None and ask.wake_until is not None:
            self._wake_until = max(ask.wake_until, self._wake_until or ask.wake_until)
        return ask

    def _wake_wait(self) -> float | None:
        """Seconds until the asks' wake second has passed (None: no such second ahead)."""
        if self._wake_until is None:
            return None
        wait = self._wake_until - self._runtime.clock()
        if wait <= 0:
            self._wake_until = None
            return None
        return wait

    def let_go_after_failure(self) -> None:
        """Free the lease for the next tick; if that fails too, it expires with this invocation."""
        try:
            self._lease.let_go(self._owner)
        except Exception as error:
            logger.warning("could not let go of the tick lease", extra={"reason": str(error)})
