"""The CLI's progress line: rewritten in place on a terminal, erased at the end unless it is the result."""

from __future__ import annotations

import io

import pytest

from dispatcher.cli.progress import PROGRESS_EVERY, Progress


class Terminal(io.StringIO):
    """stderr as a terminal."""

    def isatty(self) -> bool:
        """A terminal."""
        return True


@pytest.mark.parametrize(("last_line", "ending"), [(False, "\r\x1b[K"), (True, "\rqueued 2/2\n")])
def test_on_a_terminal_the_line_is_rewritten_and_kept_only_as_a_result(
    monkeypatch: pytest.MonkeyPatch, last_line: bool, ending: str
) -> None:
    """`rerun`'s "queued N/N" goes away when done (the docs don't show it); `enqueue`'s "sent N/N" stays."""
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    progress = Progress(last_line=last_line)
    progress.show("queued 1/2", 1)
    progress.show("queued 2/2", 2, final=True)
    assert terminal.getvalue() == "\rqueued 1/2" + ending


def test_without_a_terminal_a_line_every_so_often_and_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a pipe: a line each PROGRESS_EVERY items, and the final count when it is the result."""
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    progress = Progress(last_line=True)
    for done in range(1, PROGRESS_EVERY + 3):
        progress.show(f"sent {done}", done, final=done == PROGRESS_EVERY + 2)
    assert pipe.getvalue() == f"sent {PROGRESS_EVERY}\nsent {PROGRESS_EVERY + 2}\n"
    quiet = Progress(quiet=True)
    quiet.show("sent 1", 1, final=True)
    assert pipe.getvalue().count("\n") == 2
