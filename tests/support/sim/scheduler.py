"""Virtual time for cooperating threads: a discrete-event simulation of invocations and their start threads.

Every participant is a real thread, but only one runs at a time: it runs until it waits on
the clock (`sleep`, an AWS call's latency), waits for others (`block`, a pool's join) or
ends, and then the participant or callback due earliest runs next, at its time. Time
jumps from one event to the next, so ten simulated minutes take as long as the code they
run, and the order is the same on every run (ties go in the order they were scheduled).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class SimulationOver(BaseException):
    """The simulation stopped: a participant still waiting unwinds (nothing may catch it)."""


@dataclass(eq=False)
class Participant:
    """One thread of the simulation; once its work is done, it waits to be given more (threads are reused)."""

    name: str
    go: threading.Event = field(default_factory=threading.Event)
    work: Callable[[], None] | None = None


Entry = tuple[float, int, "Participant | Callable[[], None]"]


class Scheduler:
    """Virtual time; the thread that holds the baton runs, every other one waits for its turn."""

    def __init__(self, start: float) -> None:
        self.now = start
        self._heap: list[Entry] = []
        self._sequence = itertools.count()
        self._local = threading.local()
        self._waiting: set[Participant] = set()
        self._threads: list[threading.Thread] = []
        self._idle: list[Participant] = []
        """Threads whose work is done, waiting to be given more."""
        self._stopped = False
        self.errors: list[BaseException] = []
        """What a participant raised (other than `SimulationOver`): a test asserts there is none."""

    # -- who runs ---------------------------------------------------------------------

    def attach(self, name: str = "driver") -> None:
        """Make the calling thread a participant (the driver, which runs first)."""
        self._local.me = Participant(name)

    def current(self) -> Participant:
        """The participant running now (the caller)."""
        me: Participant | None = getattr(self._local, "me", None)
        if me is None:
            raise RuntimeError("the calling thread is not a participant of this simulation")
        return me

    def spawn(self, body: Callable[[], None], name: str) -> Participant:
        """A participant that runs ``body`` from now, after those already due (an idle thread, or a new)."""
        if self._idle:
            participant = self._idle.pop()
            participant.name = name
        else:
            participant = Participant(name)
            thread = threading.Thread(target=self._serve, args=(participant,), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        participant.work = body
        self._push(self.now, participant)
        return participant

    def _serve(self, participant: Participant) -> None:
        """A thread's life: run each piece of work it is given, then wait for the next."""
        self._local.me = participant
        try:
            while True:
                self._wait(participant)
                work, participant.work = participant.work, None
                if work is None:  # pragma: no cover — woken without work: a bug of the scheduler
                    raise RuntimeError(f"{participant.name} was woken with nothing to do")
                try:
                    work()
                except SimulationOver:
                    raise
                except BaseException as error:  # a bug in the code under test: kept for the test to see
                    self.errors.append(error)
                self._idle.append(participant)
                self._hand_on()
        except SimulationOver:
            return

    def call_at(self, moment: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` at ``moment`` (now if past), on whichever thread hands the baton on then.

        A callback must not wait: it may spawn participants, wake them or schedule more callbacks.
        """
        self._push(moment, callback)

    # -- waiting ----------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass for the caller."""
        me = self.current()
        self._push(self.now + max(0.0, seconds), me)
        self._hand_on()
        self._wait(me)

    def block(self) -> None:
        """Wait until another participant `wake`s the caller."""
        me = self.current()
        self._hand_on()
        self._wait(me)

    def wake(self, participant: Participant) -> None:
        """Let a blocked participant run again, from now."""
        self._push(self.now, participant)

    def run_until(self, moment: float) -> None:
        """The driver lets the simulation run until ``moment``; it has the baton again then."""
        self.sleep(moment - self.now)

    def stop(self) -> None:
        """End the simulation: every participant still waiting unwinds with `SimulationOver`."""
        self._stopped = True
        for participant in list(self._waiting):
            participant.go.set()
        for thread in self._threads:
            thread.join(timeout=5)

    # -- the baton ----------------------------------------------------------------------

    def _push(self, moment: float, item: Participant | Callable[[], None]) -> None:
        heapq.heappush(self._heap, (max(moment, self.now), next(self._sequence), item))

    def _hand_on(self) -> None:
        """Run the callbacks due first, then give the baton to the participant due earliest."""
        while self._heap:
            moment, _, item = heapq.heappop(self._heap)
            self.now = max(self.now, moment)
            if isinstance(item, Participant):
                item.go.set()
                return
            item()
        raise RuntimeError("nothing left to run: every participant waits for another")

    def _wait(self, me: Participant) -> None:
        self._waiting.add(me)
        if self._stopped:
            raise SimulationOver
        me.go.wait()
        me.go.clear()
        self._waiting.discard(me)
        if self._stopped:
            raise SimulationOver


class SimPool:
    """`StartThreads` in virtual time: up to ``width`` participants take the items in order."""

    def __init__(self, scheduler: Scheduler, width: int) -> None:
        self._scheduler = scheduler
        self._width = width

    @property
    def width(self) -> int:
        """How many participants take items at once."""
        return self._width

    def gather(self, call: Callable[[Item], Result], items: Sequence[Item]) -> list[Result | BaseException]:
        """``call`` on each item, ``width`` at a time; each one's result or exception, in order."""
        if not items:
            return []
        scheduler = self._scheduler
        results: list[Result | BaseException | None] = [None] * len(items)
        state = {"next": 0, "left": min(self._width, len(items))}
        parent = scheduler.current()

        def work() -> None:
            while state["next"] < len(items):
                index = state["next"]
                state["next"] += 1
                try:
                    results[index] = call(items[index])
                except SimulationOver:
                    raise
                except BaseException as error:  # the pool hands every failure back, as a thread pool does
                    results[index] = error
            state["left"] -= 1
            if state["left"] == 0:
                scheduler.wake(parent)

        for worker in range(state["left"]):
            scheduler.spawn(work, f"{parent.name}-pool-{worker}")
        scheduler.block()
        return results  # type: ignore[return-value]  # every slot is filled once all are done
