"""Coverage measures `dispatcher/`, not botocore or moto: while a call is inside them, its tracer is off.

Under Python 3.11 coverage's tracer is called on every frame of every module while it
is on, measured or not. Most of a test's frames are botocore's (building a client,
serializing a request, parsing the answer) and moto's (serving it):
`tests/integration/test_tick.py` took 38 s of CPU with coverage, 23 s without, and 25 s
with coverage and its tracer put aside as here.

The tracer is put aside while a client is built or a call made, and while moto's server
answers another process. It comes back where botocore or moto call `dispatcher/` code
again (the loopback, the emulation's middleware, a hook on the default session), so
those lines are measured as before. The code `dispatcher.local` patches into moto
(`quick_serialize`, `quick_dispatch`, the atomic SQS receive) runs inside moto, so it
is not measured here: `tests/integration/test_emulator.py` measures it (`traced_libraries`).

Nothing changes without a tracer (`make test-unit`, the soak): each wrapper is one check.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

Function = TypeVar("Function", bound=Callable[..., Any])

_SUSPENDED = threading.local()
"""``tracer``: the trace function this thread put aside (None while it traces)."""
_SWITCH = {"on": True}


def untraced(function: Function) -> Function:
    """``function`` with the tracer off while it runs (and back on after)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tracer = sys.gettrace()
        if tracer is None or not _SWITCH["on"]:
            return function(*args, **kwargs)
        sys.settrace(None)
        aside, _SUSPENDED.tracer = getattr(_SUSPENDED, "tracer", None), tracer
        try:
            return function(*args, **kwargs)
        finally:
            _SUSPENDED.tracer = aside
            sys.settrace(tracer)

    wrapper.untraced = function  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def retraced(function: Function) -> Function:
    """``function`` traced again when it is called from inside an `untraced` one."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tracer = getattr(_SUSPENDED, "tracer", None)
        if tracer is None or sys.gettrace() is not None:
            return function(*args, **kwargs)
        _SUSPENDED.tracer = None
        sys.settrace(tracer)
        try:
            return function(*args, **kwargs)
        finally:
            sys.settrace(None)
            _SUSPENDED.tracer = tracer

    wrapper.retraced = function  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def _wrap(owner: Any, name: str, how: Callable[[Any], Any]) -> None:
    current = owner.__dict__[name]
    if not hasattr(current, "untraced") and not hasattr(current, "retraced"):
        setattr(owner, name, how(current))


def untrace_libraries() -> None:
    """Put the tracer aside inside botocore and moto; bring it back where they call `dispatcher/`."""
    import botocore.client  # noqa: PLC0415
    import botocore.session  # noqa: PLC0415
    import moto.core.botocore_stubber  # noqa: PLC0415
    import moto.moto_server.werkzeug_app  # noqa: PLC0415

    import dispatcher.local.emulation  # noqa: PLC0415
    import dispatcher.local.loopback  # noqa: PLC0415
    import dispatcher.local.stack  # noqa: PLC0415

    _wrap(botocore.session.Session, "create_client", untraced)
    _wrap(botocore.client.BaseClient, "_make_api_call", untraced)
    _wrap(moto.core.botocore_stubber.BotocoreStubber, "__call__", untraced)
    _wrap(moto.moto_server.werkzeug_app.DomainDispatcherApplication, "__call__", untraced)
    _wrap(dispatcher.local.loopback, "_loopback", retraced)
    _wrap(dispatcher.local.emulation.Emulation, "__call__", retraced)
    _wrap(dispatcher.local.stack.StartLog, "hook", retraced)


def one_coverage_in_a_worker(controlled: Any) -> None:
    """Stop any coverage a pytest-xdist worker runs besides pytest-cov's own (``controlled``).

    In a worker, pytest-cov 7.1 starts coverage twice: once as it loads the first
    conftests (the worker's options name no workers, so it takes itself for a plain
    session) and again as the worker's session starts. Coverage keeps its tracers in a
    stack: while a `no_cover` test pauses the second, the first takes over. It then
    traced every `no_cover` test, and its data was never saved: a test of the in-memory
    AWS took 78 s of CPU on one worker, 35 s without coverage.
    """
    import coverage  # noqa: PLC0415

    if coverage.Coverage.current() is not controlled:
        return
    controlled.stop()
    while (other := coverage.Coverage.current()) is not None:
        other.stop()
    controlled.start()


@contextmanager
def libraries_traced() -> Iterator[None]:
    """Inside, botocore and moto are traced as every other module (what measures the emulator's patches)."""
    _SWITCH["on"] = False
    try:
        yield
    finally:
        _SWITCH["on"] = True
