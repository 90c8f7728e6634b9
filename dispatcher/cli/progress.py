"""Long work: a progress line on stderr, and a pace that keeps actions under a rate."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType

from dispatcher.cli.errors import InterruptedRunError

PROGRESS_EVERY = 500
"""Without a terminal, a progress line about every this many items."""


class Progress:
    """A progress line on stderr: rewritten in place on a terminal, every so often otherwise."""

    def __init__(self, *, quiet: bool = False, last_line: bool = False) -> None:
        """``last_line``: the final count stays (on a terminal, the line is erased otherwise)."""
        self._quiet = quiet
        self._last_line = last_line
        self._step = 0

    def show(self, line: str, done: int, *, final: bool = False) -> None:
        """Show ``line`` (``done`` items so far; ``final``: the last one)."""
        if self._quiet:
            return
        if sys.stderr.isatty():
            # Rewritten in place; at the end, kept only when it is the result (``last_line``),
            # so what stays on the screen is what the docs show.
            if final and not self._last_line:
                sys.stderr.write("\r\x1b[K")
            else:
                sys.stderr.write(f"\r{line}" + ("\n" if final else ""))
        elif (final and self._last_line) or done // PROGRESS_EVERY > self._step:
            sys.stderr.write(line + "\n")
        self._step = done // PROGRESS_EVERY
        sys.stderr.flush()

    @contextlib.contextmanager
    def on_ctrl_c(self, said: Callable[[], str]) -> Iterator[None]:
        """Ctrl-C inside: erase a line being rewritten, then `InterruptedRunError` with ``said()``.

        ``said`` says what was done so far and whether running the command again is safe.
        """
        try:
            yield
        except KeyboardInterrupt:
            if not self._quiet and sys.stderr.isatty():
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()
            raise InterruptedRunError(said()) from None


class StopAsked:
    """Ctrl-C asks work that must not be cut mid-call to stop at its next safe point.

    The first Ctrl-C is noted (`asked`) and the work goes on to `check`, where it stops
    with exact counts (a call in flight is finished and counted); a second stops at once.
    A process that ignores Ctrl-C (started with ``nohup``, say) still does.
    """

    def __init__(self) -> None:
        self.asked = False
        self._previous: Callable[[int, FrameType | None], object] | int | None = None

    def __enter__(self) -> StopAsked:
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if previous is not signal.SIG_IGN:
                self._previous = signal.signal(signal.SIGINT, self._ask)
        return self

    def _ask(self, _signal: int, _frame: FrameType | None) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True

    def check(self) -> None:
        """Stop here (`KeyboardInterrupt`) if Ctrl-C asked to."""
        if self.asked:
            raise KeyboardInterrupt

    def __exit__(
        self, _kind: type[BaseException] | None, _error: BaseException | None, _trace: TracebackType | None
    ) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def of(verb: str, done: int, total: int | None) -> str:
    """``queued 12/40`` (or ``moved 12`` without a total)."""
    return f"{verb} {done:,}" + (f"/{total:,}" if total is not None else "")


class Pace:
    """At most ``rate`` actions per second (None: no limit)."""

    def __init__(
        self,
        rate: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._interval = 0.0 if not rate else 1.0 / rate
        self._clock = clock
        self._sleep = sleep
        self._next = 0.0

    def wait(self) -> None:
        """Sleep until the next action may happen."""
        now = self._clock()
        if self._next > now:
            self._sleep(self._next - now)
            now = self._next
        self._next = now + self._interval
