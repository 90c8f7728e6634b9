"""A gate in a tick: who is inside (its count in the pool), and its rounds of admissions.

A gate is one more member of its pool. Its count is its admissions recorded in the state
table, less those of executions that left: a release deletes the record at once (any
invocation), an end a status change event reports frees it on the next tick, and an
execution inside for `CHECK_AFTER_SECONDS` is checked with `DescribeExecution` (within
the tick's pace of that API): one that ended without a word leaves then. Its round
receives requests, records the admissions, calls `SendTaskSuccess` for each (one message
group per thread, in send order), and deletes what is done, as a lane's round does with
`StartExecution`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dispatcher.core.admission import Admission, Start, admit
from dispatcher.core.batching import SQS_BATCH_LIMIT
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS, Count, StateWindow, latest_ends
from dispatcher.core.errors import ConfigurationError, TokenRefusedError, TransientError
from dispatcher.core.events import EndedExecution
from dispatcher.core.executions import execution_arn
from dispatcher.core.gates import (
    Enter,
    GateEntry,
    admission_output,
    admissions,
    entering,
    once_a_round,
    plan_request,
    token_digest,
)
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.outcomes import Counts, Outcome
from dispatcher.core.pacing import Pace
from dispatcher.core.rosters import RosterEntry, due_checks, oldest_inside_seconds, plan_inside, still_inside
from dispatcher.core.tenants import Hold, admit_shared
from dispatcher.telemetry import logger
from dispatcher.tick.gate_ports import GatePorts, GateRoster, TaskTokens
from dispatcher.tick.groups import GroupBook, reconciled
from dispatcher.tick.member_round import MemberRound, Prepared
from dispatcher.tick.outcomes import GroupOutcome, RoundOutcome
from dispatcher.tick.ports import StartThreads
from dispatcher.tick.starts import Recording
from dispatcher.tick.warm import WarmState

PROBE_SECONDS = 10.0
"""How often a gate with pending admissions and no free place looks for their requests. Each
look receives (and releases) up to ten requests, which counts as a receive of each: pending
admissions are rare (a tick that died, a call that failed) and are resolved within a visibility
timeout, so a few looks stay far from the queue's `maxReceiveCount`."""


class GateCounter:
    """Counts the executions inside one gate, and keeps who they are for the gate's rounds."""

    def __init__(
        self,
        gate: Gate,
        ports: GatePorts,
        roster: GateRoster,
        warm: WarmState,
        clock: Callable[[], float],
    ) -> None:
        self.gate = gate
        """The gate (its live limits are the topology's: this is who it is)."""
        self._ports = ports
        self._roster = roster
        self._warm = warm
        self._clock = clock
        self.state_machine_arn = ports.state_machine.arn
        self.count_key = gate.count_key
        """What its count is kept under (its own roster)."""
        self.inside: dict[str, GateEntry] = {}
        """Execution name → its admission, as of this tick's count and the rounds since."""
        self.holds: dict[str, Hold] = {}
        """Group → its request held for the gate's limit per group, as of this tick's count."""

    @property
    def name(self) -> str:
        """The gate's name."""
        return self._ports.name

    @property
    def ports(self) -> GatePorts:
        """The gate's queue, dead-letter queue, state machine and task tokens."""
        return self._ports

    def ensure_standard(self) -> None:
        """Refuse an EXPRESS (or missing) state machine; a warm container checks once."""
        if self.state_machine_arn not in self._warm.standard:
            self._ports.state_machine.ensure_standard()
            self._warm.standard.add(self.state_machine_arn)

    def review_from(self, now: float) -> float:
        """Its state machine's ends are news for as long as the list may lag behind them."""
        return now - RECENT_START_WINDOW_SECONDS

    def count(self, window: StateWindow, ended: Sequence[EndedExecution] = ()) -> Count:
        """Who is inside now: the gate's admissions, less the executions that ended or a check says left.

        ``window``: its state machine's, as `Records.windows` read it a moment before (its ends).
        """
        now = self._clock()
        read = self._roster.read(self.gate)
        planned = plan_inside(admissions(read.entries), latest_ends([*window.ended, *ended]))
        left = self._left(planned.inside, list(planned.ended), now)
        gone = {record.name for record in left}
        inside = [record for record in planned.inside if record.name not in gone]
        if left:
            logger.info("left the gate", extra={"gate": self.name, "executions": [r.name for r in left]})
            self._roster.leave(left)
        if read.stale:
            self._roster.tidy(self.gate, read.stale)
        self.inside = {record.name: record for record in inside}
        self.holds = {hold.group: hold for hold in read.held}
        return Count(len(inside), oldest_inside_seconds(inside, now))

    def _left(self, inside: Sequence[GateEntry], ended: list[GateEntry], now: float) -> list[GateEntry]:
        """Who left: those an end says did, those a whole listing shows ended, those a check says left."""
        left = ended + self._reconciled(inside, now)
        gone = {record.name for record in left}
        return left + self._checked_out([record for record in inside if record.name not in gone], now)

    @property
    def pending(self) -> list[GateEntry]:
        """Admissions recorded but not confirmed: their requests may be back on the queue."""
        return [record for record in self.inside.values() if not record.confirmed]

    def probe_due(self, now: float) -> bool:
        """Whether to look for the requests of pending admissions now (at most every `PROBE_SECONDS`).

        They take no place (theirs is held already), so they are found even when the pool
        has none free: else a place held by an admission whose tick died before its
        `SendTaskSuccess` could be the pool's last, and nothing would ever free it.
        """
        if not self.pending or now - self._warm.probed.get(self.name, -math.inf) < PROBE_SECONDS:
            return False
        self._warm.probed[self.name] = now
        return True

    def confirm(self, names: Sequence[str]) -> None:
        """Note that `SendTaskSuccess` took these admissions (raises when it can't be written)."""
        now = self._clock()
        self._roster.confirm(self.gate, names, now)
        for name in names:
            record = self.inside.get(name)
            if record is not None:
                self.inside[name] = record.model_copy(update={"confirmed": True})

    def _reconciled(self, inside: Sequence[GateEntry], now: float) -> list[GateEntry]:
        """The executions inside that a whole listing of RUNNING, read now, shows ended (`reconciled`)."""
        return reconciled(self.name, self._ports.state_machine, self._warm, inside, now)

    def _checked_out(self, inside: Sequence[GateEntry], now: float) -> list[GateEntry]:
        """The executions inside long enough for a check that `DescribeExecution` says ended, longest first.

        Within the tick's pace of that API; what it leaves unchecked keeps its place and is
        checked on a later tick. One that runs (or that no read shows yet) is checked again
        `CHECK_AFTER_SECONDS` later.
        """
        machine = self.state_machine_arn
        checked = {
            record.name: self._warm.seen_running.get(execution_arn(machine, record.name), -math.inf)
            for record in inside
        }
        pace = self._warm.paces_for(machine).describe
        left: list[GateEntry] = []
        for record in due_checks(inside, checked, now):
            if not pace.take(now, 1):
                break
            try:
                state = self._ports.state_machine.state_of(record.name)
            except TransientError as error:
                logger.warning("could not check an execution inside", extra={"reason": str(error)})
                break
            if still_inside(None if state is None else state.status):
                self._warm.saw_running(execution_arn(machine, record.name), now)
            else:
                left.append(record)
        return left


class GateRound(MemberRound):
    """One gate's side of its rounds in one tick: its requests, admitted into its pool with task tokens."""

    def __init__(  # noqa: PLR0913 — its ports, threads, warm state, counter, probe and groups
        self,
        ports: GatePorts,
        pool: StartThreads,
        *,
        warm: WarmState,
        counter: GateCounter,
        probing: bool = False,
        books: Mapping[str, GroupBook] | None = None,
    ) -> None:
        """``probing``: a round with no free place, for the requests of pending admissions (`probe_due`)."""
        super().__init__(ports, pool, warm=warm, books=books)
        self._gate = ports
        self._counter = counter
        self._probing = probing

    def receive(
        self, free: int, *, wait: bool = True, now: float = 0.0
    ) -> tuple[list[QueuedMessage], str | None]:
        """Receive up to one round of requests; a probe, one batch without waiting."""
        if self._probing:
            return self._gate.queue.receive(SQS_BATCH_LIMIT, wait=False), None
        return super().receive(free, wait=wait, now=now)

    def pace(self) -> Pace:
        """Below `SendTaskSuccess`'s quota, the account's in the gate's region."""
        return self._warm.paces_for(self._counter.state_machine_arn).admit

    def decide(self, messages: Sequence[QueuedMessage], free: int, now: float = 0.0) -> Admission:
        """Admit in receive order up to the free slots; an execution inside already takes none.

        A request for an execution another request of the round names waits for the next round.
        """
        machine = self._counter.state_machine_arn
        inside = self._counter.inside
        plan = once_a_round(lambda message: plan_request(message, machine))
        if self.book is not None:
            return admit_shared(
                messages,
                free,
                self.book.share,
                self.book.running,
                plan=plan,
                takes_slot=lambda start: start.name not in inside,
            )
        return admit(messages, free, plan, takes_slot=lambda start: start.name not in inside)

    def _starts(self, part: Prepared, clock: Callable[[], float]) -> GateStarts:
        return GateStarts(
            gate=self.name,
            tokens=self._gate.tokens,
            counter=self._counter,
            warm=self._warm,
            starts=entering(part.admission.starts),
            outcome=part.outcome,
            clock=clock,
        )

    def settle(self, part: Prepared) -> Counts:
        """Confirm the admissions `SendTaskSuccess` took, then delete what is done and release the rest.

        Confirmed before their requests are deleted: a request deleted is an admission
        confirmed. When the confirmation can't be written, those requests stay on the
        queue: they come back, are known inside, and are confirmed then.
        """
        starts, outcome = part.starts, part.outcome
        if isinstance(starts, GateStarts) and starts.to_confirm:
            try:
                self._counter.confirm([name for name, _ in starts.to_confirm])
            except (TransientError, ConfigurationError) as error:
                logger.warning(
                    "could not confirm admissions: their requests stay", extra={"reason": str(error)}
                )
                outcome.unsettled += [message for _, message in starts.to_confirm]
        return super().settle(part)

    @staticmethod
    def _also_counted(outcome: RoundOutcome) -> list[QueuedMessage]:
        """None: a request for an execution inside is counted in its group already."""
        return []


@dataclass
class GateStarts:
    """One gate's part of a round: its admissions, recorded first, then made with `SendTaskSuccess`."""

    gate: str
    tokens: TaskTokens
    counter: GateCounter
    warm: WarmState
    starts: Sequence[Enter]
    outcome: RoundOutcome
    clock: Callable[[], float]
    recorded: set[str] = field(default_factory=set)
    """Names whose admission is recorded: only these are admitted."""
    to_confirm: list[tuple[str, QueuedMessage]] = field(default_factory=list)
    """Admissions `SendTaskSuccess` took (or that keep their place), with their requests."""
    before: dict[str, GateEntry] = field(default_factory=dict)
    """Who was inside before this round: what its decisions go by."""
    requests: dict[str, Enter] = field(default_factory=dict)
    """Execution name → its request this round (one a round: `once_a_round`)."""

    def __post_init__(self) -> None:
        self.before = dict(self.counter.inside)
        self.requests = {start.name: start for start in self.starts}

    def _token(self, start: Start) -> str:
        return self.requests[start.name].token

    def _digest(self, start: Start) -> str:
        return token_digest(self._token(start))

    def _prior(self, start: Start) -> GateEntry | None:
        """Its admission recorded before this round with the same token, if there is one."""
        prior = self.before.get(start.name)
        return prior if prior is not None and prior.token == self._digest(start) else None

    def to_record(self, taken: set[tuple[str, str]], now: float) -> Recording:
        """An admission entry for each request, unless the same token's is there already.

        An execution inside with another token entered again (it left without a release
        that reached the dispatcher): its record is written anew, so a late release of its
        earlier entry frees nothing. One inside with the same token may have been admitted
        by a tick that died before deleting the request: its record stays as it is.
        """
        entries: list[RosterEntry] = []
        for start in self.starts:
            if self._prior(start) is not None:
                self.recorded.add(start.name)
                continue
            entries.append(
                GateEntry(
                    member=self.gate,
                    name=start.name,
                    recorded_at=now,
                    state_machine_arn=self.counter.state_machine_arn,
                    group=start.message.group_id,
                    token=self._digest(start),
                )
            )
        return Recording(entries=entries)

    def admit(self, start: Start, outcome: GroupOutcome) -> None:
        """Admit one execution: `SendTaskSuccess` with its token, unless it is known inside with it.

        Known inside: its admission is confirmed, or this container's `SendTaskSuccess`
        took its token (then it is confirmed now).
        """
        message, name, digest = start.message, start.name, self._digest(start)
        prior = self._prior(start)
        known = prior is not None and prior.confirmed
        if known or digest in self.warm.admitted_tokens:
            if not known:
                self.to_confirm.append((name, message))
            outcome.add(Outcome.ALREADY, [message])
            logger.info("already inside", extra={"gate": self.gate, "execution": name})
            return
        # Recorded now, it holds its place from here: a call that fails may have taken the token.
        entered = [entry for entry in admissions(self.outcome.entered) if entry.name == name]
        record = entered[0] if entered else prior
        if record is not None:
            self.counter.inside[name] = record
        now = self.clock()
        try:
            self.tokens.succeed(self._token(start), admission_output(self.gate, now))
        except TokenRefusedError as error:
            self._refused(start, outcome, error)
            return
        self.warm.admitted(digest, now)
        self.to_confirm.append((name, message))
        outcome.add(Outcome.STARTED, [message])
        logger.info("admitted", extra={"gate": self.gate, "execution": name, "group": message.group_id})

    def _refused(self, start: Start, outcome: GroupOutcome, error: TokenRefusedError) -> None:
        """A refused token: a new admission is dropped (its record goes); one maybe taken keeps its place.

        Step Functions refuses a token it took already. Recorded before with the same token,
        it may have been admitted by a tick that died before deleting the request; refused
        on a retry, the attempt before may have taken it with its answer lost. Either way
        the place stays until the execution releases, ends, or a check finds it ended.
        """
        if self._prior(start) is not None or error.retried:
            self.to_confirm.append((start.name, start.message))
            # Recorded before, its place was counted; recorded this round, it takes one now.
            outcome.add(
                Outcome.ALREADY if self._prior(start) is not None else Outcome.STARTED, [start.message]
            )
            logger.info(
                "refused a token that may have been taken: kept inside",
                extra={"gate": self.gate, "execution": start.name, "reason": str(error)},
            )
            return
        # Its record (written this round, maybe over an earlier entry's) goes: it is not inside.
        self.counter.inside.pop(start.name, None)
        outcome.attempted.discard(start.name)
        outcome.add(Outcome.REFUSED, [start.message])
        logger.warning(
            "task token refused: the request is dropped",
            extra={"gate": self.gate, "execution": start.name, "reason": str(error)},
        )
