"""One invocation's service, from the settings and the control parameter: the one home of the wiring.

The Lambda handler (on boto3's adapters), the in-memory AWS's function and the
benchmarks (on the simulated services) all build their `Dispatcher` here, so a change to
how settings become limits, lanes and ports is made once.
"""

from __future__ import annotations

from collections.abc import Callable

from dispatcher.core.control import Control, steer
from dispatcher.core.topology import Topology
from dispatcher.settings import Settings
from dispatcher.tick.policy import TickPolicy
from dispatcher.tick.ports import Runtime
from dispatcher.tick.service import Dispatcher
from dispatcher.tick.warm import WarmState
from dispatcher.tick.wiring import Resources, wire


def steered(settings: Settings, control: Control | None, configured: Topology | None = None) -> Topology:
    """Every pool, lane and gate with their live limits (pool ``default``'s MAX and pause among them).

    The control parameter's keys where set (``control``: its value, None when there is
    none), else the environment's and ``LANES``' values. A malformed ``LANES``, or a
    control parameter that names what is not configured, is a `ConfigurationError`.
    ``configured``: ``settings.topology()`` when the caller has it already (parsed once).
    """
    topology = settings.topology() if configured is None else configured
    return steer(topology, control, settings.control_parameter)


def policy(settings: Settings, topology: Topology) -> TickPolicy:
    """What one invocation works within."""
    return TickPolicy(
        topology=topology,
        time_margin_seconds=settings.time_margin_seconds,
        start_concurrency=settings.start_concurrency,
        list_reuse_seconds=settings.list_reuse_seconds,
        loop_seconds=settings.loop_seconds,
    )


def dispatcher_for(  # noqa: PLR0913 — each is one input of an invocation
    settings: Settings,
    *,
    topology: Topology,
    resources: Resources,
    runtime: Runtime,
    warm: WarmState,
    control: Callable[[], Control | None] | None = None,
    configured: Topology | None = None,
) -> Dispatcher:
    """The service for one invocation: its policy, every lane's ports, its time and threads.

    ``control``: the control parameter's value, read again (through its cache) for each
    later tick of the invocation, so a keeper that keeps ticking follows the operator;
    ``configured``: the topology before the control parameter's overrides (``LANES``), if
    the caller has it already.
    """
    steer = None
    if control is not None:
        base = settings.topology() if configured is None else configured
        steer = lambda: steered(settings, control(), base)  # noqa: E731 — one line, one closure
    return Dispatcher(policy(settings, topology), wire(topology, resources), runtime, warm, steer)
