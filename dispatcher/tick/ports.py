"""What the tick needs from the world, as Protocols: the adapters satisfy them, and so does any other AWS.

Every method's errors are the dispatcher's own (`dispatcher.core.errors`): a port says
`TransientError` when AWS is still throttling after retries and `ConfigurationError`
when the deployment is wrong, whatever it runs on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from dispatcher.core.adaptive import LimitState
from dispatcher.core.admission import DeadLetter
from dispatcher.core.counting import LedgerRequest, LedgerStart, RunningListing, StateWindow
from dispatcher.core.events import Ask, EndedExecution
from dispatcher.core.executions import ExecutionState
from dispatcher.core.jobs import Dropped, JobRecord
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.rosters import RosterEntry, RosterRead
from dispatcher.core.sizes import Reservation, SizeEntry
from dispatcher.core.tenants import Hold
from dispatcher.core.topology import DEFAULT, Member

Item = TypeVar("Item")
KindPorts = TypeVar("KindPorts", bound="MemberPorts")
Result = TypeVar("Result")


class JobQueue(Protocol):
    """The source FIFO queue."""

    def receive(self, count: int, *, wait: bool = True) -> list[QueuedMessage]:
        """Up to ``count`` (≤ 10) messages in queue order; ``wait`` long-polls."""
        ...

    def delete(self, messages: Sequence[QueuedMessage]) -> list[QueuedMessage]:
        """Delete done messages; those that failed to delete (they come back)."""
        ...

    def make_visible(self, messages: Sequence[QueuedMessage]) -> list[QueuedMessage]:
        """Make messages visible again now (they wait for a later round); those that failed."""
        ...

    def hide(self, messages: Sequence[QueuedMessage], seconds: int) -> list[QueuedMessage]:
        """Keep messages in flight for ``seconds`` (a job held for its group); those that failed."""
        ...


class DeadLetters(Protocol):
    """The FIFO dead-letter queue."""

    def send(self, dead_letters: Sequence[DeadLetter]) -> list[DeadLetter]:
        """Copy each message there with its reason; those that failed."""
        ...


class Executions(Protocol):
    """What holds a pool's slots, counted: the RUNNING executions of a state machine.

    (A gate's executions inside its section are counted next: another kind of member.)
    """

    @property
    def arn(self) -> str:
        """The state machine's ARN."""
        ...

    def ensure_standard(self) -> None:
        """Raise `ConfigurationError` unless it exists and is STANDARD."""
        ...

    def list_running(
        self, max_concurrency: int | None, ends: Mapping[str, float], listed_at: float
    ) -> RunningListing:
        """RUNNING executions, paged until ``max_concurrency`` of them hold a slot (None: all)."""
        ...

    def state_of(self, name: str) -> ExecutionState | None:
        """What `DescribeExecution` says of execution ``name``; None when there is none."""
        ...


class Admissions(Protocol):
    """What admits one message into a slot: a state machine's `StartExecution` (or `RedriveExecution`).

    (A gate admits with `SendTaskSuccess` next: another kind of member.)
    """

    @property
    def arn(self) -> str:
        """The state machine's ARN."""
        ...

    def state_of(self, name: str) -> ExecutionState | None:
        """What `DescribeExecution` says of execution ``name``; None when there is none."""
        ...

    def has_input(self, name: str, execution_input: str) -> bool:
        """Whether the existing execution ``name`` has this input."""
        ...

    def start(self, name: str, execution_input: str) -> str:
        """Start execution ``name``; its ARN. `ExecutionExistsError`, `RejectedInputError`."""
        ...

    def redrive(self, name: str, client_token: str) -> None:
        """Redrive execution ``name``. `RejectedInputError` when it can't be."""
        ...


class StateMachine(Executions, Admissions, Protocol):
    """A state machine: its executions counted, and started (one adapter does both)."""


class StartLedger(Protocol):
    """The state table as the start ledger: a start written before it happens, ends noted, starts voided."""

    def starts_of(self, requests: Sequence[LedgerRequest], now: float) -> list[list[LedgerStart]]:
        """The starts `record` writes for starting these executions now, each lane's apart."""
        ...

    def record(
        self, starts: Sequence[LedgerStart], kept: Sequence[JobRecord | Dropped] = ()
    ) -> list[LedgerStart | JobRecord | Dropped]:
        """Write starts of one `starts_of` (≤ 625) before they happen; those left unprocessed.

        ``kept``: job records written in the same `BatchWriteItem` calls (those left are returned too).
        """
        ...

    def note_ended(self, ended: Sequence[EndedExecution], now: float) -> int:
        """Remember the ends status change events reported; how many were left (best effort)."""
        ...

    def void(self, starts: Sequence[LedgerStart], now: float) -> int:
        """Void starts that no longer count, now; how many were left (best effort)."""
        ...


class StateReads(Protocol):
    """The state table as a tick reads it: one read of its partition, every kind of item in it."""

    def window(self, oldest: float) -> StateWindow:
        """Starts and ends written at or after ``oldest``, each naming its state machine (and the rest)."""
        ...


class MemberQueueRecords(Protocol):
    """The state table's memory of the members' queues (what a member removed from ``LANES`` left)."""

    def record_members(self, queues: Mapping[str, Mapping[str, str]]) -> None:
        """Keep the members' queues (`dispatcher.core.member_queues`), replacing what was kept."""
        ...


class LimitRecords(Protocol):
    """The state table's adaptive pools' limits, shared by every writer."""

    def record_limit(self, pool: str, state: LimitState, previous: LimitState | None, now: float) -> bool:
        """Write an adaptive pool's limit, made from ``previous``; False when another writer changed it."""
        ...

    def limit(self, pool: str) -> LimitState | None:
        """An adaptive pool's limit as last written (None: never written: L is MAX)."""
        ...


class SizeRecords(Protocol):
    """The state table's pools' sized executions (`dispatcher.core.sizes`), kept for their whole lives."""

    def record_sizes(self, pool: str, added: Mapping[str, SizeEntry], gone: Collection[str]) -> None:
        """Add these sized executions (before they start), drop packs all ended; raise `TransientError`."""
        ...

    def record_reservation(self, pool: str, reservation: Reservation | None) -> None:
        """Set a pool's reservation (None: remove it); raise `TransientError`."""
        ...


class StateTable(StartLedger, StateReads, MemberQueueRecords, LimitRecords, SizeRecords, Protocol):
    """Every role of the state table, as one adapter plays them all (boto3's, the in-memory AWS's)."""


class Roster(Protocol):
    """Who holds a member's places — a tenant lane's starts, a gate's admissions — kept until each left.

    A member's roster also keeps its jobs held for their group's limit (`Hold`).
    """

    def read(self, member: Member) -> RosterRead:
        """The member's roster: its entries and holds."""
        ...

    def enter(self, entries: Sequence[RosterEntry]) -> list[RosterEntry]:
        """Write entries before their executions start or are admitted; those left unprocessed."""
        ...

    def leave(self, entries: Sequence[RosterEntry]) -> int:
        """Free the places of executions that left (best effort); how many were left."""
        ...

    def tidy(self, member: Member, keys: Sequence[str]) -> int:
        """Delete items of ``member``'s roster by key (stale confirmations, shown holds); how many left."""
        ...

    def hold(self, member: Member, holds: Sequence[Hold]) -> None:
        """Note jobs held for their group's limit in ``member``'s roster (raises when not written)."""
        ...


class StartRate(Protocol):
    """A lane's start-rate bucket, kept where every invocation sees it (`dispatcher.core.rate`)."""

    def available(self, now: float) -> int:
        """Whole starts the bucket allows now."""
        ...

    def take(self, wanted: int, now: float) -> int:
        """Take tokens for up to ``wanted`` starts (one conditional write); how many were granted."""
        ...

    def next_token_in(self, now: float) -> float:
        """Seconds until one more start is allowed, as of the bucket's latest read or write (no call)."""
        ...


class JobRecords(Protocol):
    """Jobs that never started: the records of what was dropped, expired or dead-lettered."""

    def write(self, records: Sequence[JobRecord | Dropped]) -> int:
        """Keep the records of jobs dropped, expired or dead-lettered (best effort); how many were left."""
        ...


class Lease(Protocol):
    """The tick lease: whoever holds it counts and spends the free slots."""

    def acquire(self, owner: str, now: float, held_until: float) -> bool:
        """Take it if free, expired or already ours."""
        ...

    def ask_again(self, owner: str, now: float, wake_until: float | None = None) -> bool:
        """Ask the live keeper for one more tick (``wake_until``: wakes' second); False: none else has it."""
        ...

    def take_ask(self, owner: str) -> Ask | None:
        """Take a request for another tick, if one came (None: none came)."""
        ...

    def let_go_unless_asked(self, owner: str) -> Ask | None:
        """Let go unless another tick was asked for (None: let go; else the request, taken)."""
        ...

    def let_go(self, owner: str) -> None:
        """Let go whatever was asked for."""
        ...


class StartThreads(Protocol):
    """Runs calls at once, within a bound (the start threads)."""

    @property
    def width(self) -> int:
        """How many calls run at once, at most."""
        ...

    def gather(self, call: Callable[[Item], Result], items: Sequence[Item]) -> list[Result | BaseException]:
        """``call`` on each item; once every one is done, each one's result or exception, in order."""
        ...


@dataclass(frozen=True)
class MemberPorts:
    """What every member of a pool has (a lane, or a gate): its name, its FIFO queue, its DLQ, its roster."""

    name: str
    queue: JobQueue
    dead_letters: DeadLetters
    roster: Roster
    """Who holds its places, when it counts them by name (a tenant lane, a gate)."""


@dataclass(frozen=True)
class LanePorts(MemberPorts):
    """One lane's resources: its queue and DLQ, what counts its slots and admits its jobs.

    Lanes that start one state machine share its `Executions` and `Admissions` objects.
    """

    state_machine: Executions
    """What holds the lane's slots: its state machine's executions."""
    admissions: Admissions
    """What admits its jobs: its state machine's starts."""
    rate: StartRate | None = None
    """The lane's start-rate bucket; None when its starts are not rate-capped."""


@dataclass(frozen=True)
class Ports:
    """The AWS resources one dispatcher works on: every member's, the one tick lease, the records."""

    members: tuple[MemberPorts, ...]
    """Every member's ports, kind after kind (`dispatcher.tick.kinds`): lane ``default`` first."""
    lease: Lease
    ledger: StartLedger
    """Every lane's recent starts and ends."""
    reads: StateReads
    """The tick's one read of the state table."""
    limits: LimitRecords
    member_queues: MemberQueueRecords
    jobs: JobRecords | None = None
    """Pending cancellations and job records (None: no lane's jobs are followed)."""
    sizes: SizeRecords | None = None
    """The pools' sized executions (None: jobs' sizes can't be kept, so a sized job waits)."""

    def of_kind(self, kind: type[KindPorts]) -> tuple[KindPorts, ...]:
        """The ports of the members of one kind (``LanePorts``, …), in order."""
        return tuple(member for member in self.members if isinstance(member, kind))

    @property
    def lanes(self) -> tuple[LanePorts, ...]:
        """Every lane's ports (the primary kind's: lane ``default`` first)."""
        return self.of_kind(LanePorts)

    @property
    def default(self) -> LanePorts:
        """The environment's lane (lane ``default``)."""
        return next(lane for lane in self.lanes if lane.name == DEFAULT)


@dataclass(frozen=True)
class Runtime:
    """Time and threads as one invocation sees them."""

    clock: Callable[[], float]
    """Epoch seconds."""
    sleep: Callable[[float], None]
    remaining_seconds: Callable[[], float]
    """Until the invocation times out."""
    pool: Callable[[int], AbstractContextManager[StartThreads]]
    """A pool of that many threads, for one tick."""
