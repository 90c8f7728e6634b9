"""What a test world injects: AWS's documented lag, the status change events' delivery, the faults.

A `World` (`tests.support.world`) draws from these plans; scenarios, the in-memory AWS and
the benchmark each make their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Lag:
    """How stale `ListExecutions` and `DescribeExecution` may be, in virtual seconds.

    ``start``: a new execution may be missing from the list for up to this long.
    ``end``: a finished execution may still be listed (and described) as RUNNING.
    ``describe``: `DescribeExecution` may say a new execution does not exist.
    ``flaky``: each call draws its own staleness (an execution seen once may be missed
    again by a later call, as reads from different replicas would); otherwise each
    execution has one fixed delay and, once seen, stays seen.
    """

    start: float = 0.0
    end: float = 0.0
    describe: float = 0.0
    flaky: bool = False


@dataclass
class EventPlan:
    """How the emulated EventBridge delivers status change events of ended executions."""

    enabled: bool = False
    lost: float = 0.0
    """Chance an event is never delivered."""
    duplicated: float = 0.0
    """Chance an event is delivered twice (each copy with its own delay)."""
    delay: float = 0.0
    """Each delivery comes up to this many seconds after the end (so events reorder)."""
    batch_size: int = 0
    """0: each event invokes the function by itself. Otherwise the events go to an SQS queue and
    an event source mapping invokes the function with batches of up to this many records."""
    batch_lost: float = 0.0
    """Chance a batch never reaches the function."""
    batch_doubled: float = 0.0
    """Chance a batch is delivered again later (at least once: its invocation outlived the visibility)."""
    malformed: float = 0.0
    """Chance a batch also carries a record that is not an end of the state machine."""


@dataclass
class FaultPlan:
    """Which faults the middleware injects into the dispatcher's requests."""

    throttle: dict[str, float] = field(default_factory=dict)
    """Operation (e.g. ``StartExecution``) → chance a request is throttled."""
    server_error: dict[str, float] = field(default_factory=dict)
    """Operation → chance of a 500 before the request is processed."""
    lost_response: dict[str, float] = field(default_factory=dict)
    """Operation → chance the request is processed and the client gets a 500."""
    partial_delete: float = 0.0
    """Chance each `DeleteMessageBatch` entry fails (reported in ``Failed``)."""
    denied: frozenset[str] = frozenset()
    """Operations the dispatcher's role may not call (AccessDeniedException)."""
    lag: Lag = field(default_factory=Lag)
    enabled: bool = True

    def quiet(self) -> None:
        """Switch injected faults off (the documented lag of AWS stays)."""
        self.enabled = False
