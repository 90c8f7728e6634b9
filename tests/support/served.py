"""`dispatcher local` served in a process of its own, read a line at a time."""

from __future__ import annotations

import contextlib
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from tests.support.cli_runner import SCRIPT, Cli


@dataclass
class Served:
    """A `dispatcher local` process, the first line it printed, and a shell holding its exports."""

    process: subprocess.Popen[str]
    first: str
    exports: dict[str, str]
    env: dict[str, str]
    _lines: queue.Queue[str | None] | None = None

    def next_line(self, wanted: str, timeout: float = 60.0) -> str:
        """The next line it prints that holds ``wanted``; fail after ``timeout`` seconds.

        Its output is read on a thread from the first call on, so that a wait can time out.
        """
        lines = self.reading()
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {wanted!r} within {timeout:g} s") from None
            assert line is not None, f"it ended before a line with {wanted!r}"
            if wanted in line:
                return line

    def rest(self) -> str:
        """What it printed that no `next_line` read, to its end (it must be ending)."""
        lines = []
        while (line := self.reading().get(timeout=60)) is not None:
            lines.append(line)
        return "".join(lines)

    def reading(self) -> queue.Queue[str | None]:
        """Its output, a line at a time, read on a thread from the first call on (None: it ended)."""
        if self._lines is None:
            lines: queue.Queue[str | None] = queue.Queue()
            stream = self.process.stdout
            assert stream is not None

            def read() -> None:
                for line in iter(stream.readline, ""):
                    lines.put(line)
                lines.put(None)

            threading.Thread(target=read, daemon=True).start()
            self._lines = lines
        return self._lines


@contextlib.contextmanager
def served(cli: Cli, *arguments: str) -> Iterator[Served]:
    """`dispatcher local --port 0 ARGUMENTS`, read up to its last line; Ctrl-C at the end must exit 0."""
    shell = {key: value for key, value in cli.environment().items() if not key.startswith("AWS_")}
    process = subprocess.Popen(
        [str(SCRIPT), "local", "--port", "0", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=shell,
    )
    local: Served | None = None
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        exports = {}
        for line in iter(process.stdout.readline, ""):
            if line.strip().startswith("export "):
                key, _, value = line.strip().removeprefix("export ").partition("=")
                exports[key] = value
            if "Ctrl-C stops" in line:
                break
        local = Served(process, first, exports, {**shell, **exports})
        local.reading()  # from here its output is read on a thread: a full pipe would block it
        yield local
    finally:
        process.send_signal(signal.SIGINT)
        if local is None:
            rest, errors = process.communicate(timeout=60)
        else:
            assert process.stderr is not None
            errors = process.stderr.read()
            rest = local.rest()
        assert process.wait(timeout=60) == 0, errors
        assert rest.endswith("Stopped. The emulator's state is gone.\n")
