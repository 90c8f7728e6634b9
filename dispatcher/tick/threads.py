"""The start threads: a bounded thread pool that waits for every call before any failure is acted on."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from contextlib import contextmanager
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class ThreadPool:
    """`StartThreads` on real threads."""

    def __init__(self, executor: ThreadPoolExecutor, width: int) -> None:
        self._executor = executor
        self.width = width

    def gather(self, call: Callable[[Item], Result], items: Sequence[Item]) -> list[Result | BaseException]:
        """Run ``call`` on each item; once every one is done, its result or its exception.

        Waiting for all before looking at any failure matters: a failure must not be acted
        on (messages shown again, a tick stopped) while other calls of the batch are running.
        """
        futures = [self._executor.submit(call, item) for item in items]
        wait_for(futures)
        return [future.exception() or future.result() for future in futures]


@contextmanager
def thread_pool(width: int) -> Iterator[ThreadPool]:
    """A pool of ``width`` threads for one tick."""
    with ThreadPoolExecutor(width, thread_name_prefix="dispatcher") as executor:
        yield ThreadPool(executor, width)


def first_failure(results: Sequence[object]) -> BaseException | None:
    """The first exception among the results."""
    return next((result for result in results if isinstance(result, BaseException)), None)
