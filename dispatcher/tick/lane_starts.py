"""A lane's starts of a round: `StartExecution` (or `RedriveExecution`) for each job it admitted, in order."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from dispatcher.core.admission import Cancelled, DeadLetter, Expiring, Redrive, Start
from dispatcher.core.counting import LedgerRequest
from dispatcher.core.errors import (
    ExecutionExistsError,
    NotYetError,
    RejectedInputError,
)
from dispatcher.core.executions import execution_arn, same_input
from dispatcher.core.lane_rosters import packed
from dispatcher.core.outcomes import Outcome
from dispatcher.core.pacing import Latency
from dispatcher.core.redrive import RedriveVerdict, redrive_decision, redrive_token
from dispatcher.core.rosters import RosterEntry
from dispatcher.telemetry import logger
from dispatcher.tick.outcomes import GroupOutcome, RoundOutcome
from dispatcher.tick.ports import Admissions
from dispatcher.tick.starts import Recording


@dataclass
class LaneStarts:
    """One lane's part of a round's starts: its state machine and records, what it admitted, how it went."""

    admissions: Admissions
    starts: Sequence[Start]
    outcome: RoundOutcome
    clock: Callable[[], float]
    latency: Latency
    """`StartExecution`'s round trip, measured here."""
    lane: str = ""
    """The lane's name, recorded with each start (where a re-run of it goes back)."""
    roster: bool = False
    """The lane counts by message group: its roster keeps each start until it ends."""
    recorded: set[str] = field(default_factory=set)
    """Names whose start record was written: only these may start."""
    in_window: Callable[[str, str], bool] = lambda _arn, _name: False
    """Whether the tick's window holds a start record of (state machine, name): its start may not show yet."""

    def to_record(self, taken: set[tuple[str, str]], now: float) -> Recording:
        """Each start but a cancelled one, once, with its message group (and the redriveCount, for a redrive).

        An execution an earlier lane of the same state machine recorded this round (in
        ``taken``) is left to that lane: this one's waits for a later round. A lane that
        counts by message group enters each in its roster too.
        """
        groups: dict[str, str] = {}
        redrives: dict[str, int] = {}
        slots: dict[str, int] = {}
        arn = self.admissions.arn
        for start in self.starts:
            if isinstance(start, Cancelled):
                continue  # never started: nothing to count, nothing to void
            if (arn, start.name) in taken and start.name not in groups:
                continue
            taken.add((arn, start.name))
            groups.setdefault(start.name, start.message.group_id)
            if isinstance(start, Redrive):
                redrives.setdefault(start.name, start.redrive_count)
            if start.slots > 1:
                slots.setdefault(start.name, start.slots)
        entries = packed(
            (
                RosterEntry(
                    member=self.lane,
                    name=name,
                    recorded_at=now,
                    state_machine_arn=arn,
                    group=group,
                    slots=slots.get(name, 1),
                )
                for name, group in groups.items()
                if self.roster
            ),
            write=uuid.uuid4().hex[:12],
        )
        return Recording(LedgerRequest(arn, groups, redrives, lane=self.lane, slots=slots), entries)

    def cancel(self, names: Collection[str]) -> None:
        """Its starts of these names become `Cancelled`: they keep their places, and make no call."""
        self.starts = [
            Cancelled(start.message, start.name, slots=start.slots) if start.name in names else start
            for start in self.starts
        ]

    def admit(self, start: Start, outcome: GroupOutcome) -> None:
        """Start (or redrive) one execution; what became of its message goes to ``outcome``."""
        if isinstance(start, Redrive):
            self._redrive(start, outcome)
            return
        if isinstance(start, Expiring):
            self._expire(start, outcome)
            return
        state_machine = self.admissions
        message, name = start.message, start.name
        began = self.clock()
        try:
            state_machine.start(name, message.body)
            self.latency.observe(self.clock() - began)
        except ExecutionExistsError:
            if state_machine.has_input(name, message.body):
                outcome.add(Outcome.ALREADY, [message])
                logger.info("already started", extra={"execution": name, "message_id": message.message_id})
            else:
                outcome.dead_letters.append(
                    DeadLetter(
                        message,
                        f"name collision: execution {name!r} already exists with a different input",
                    )
                )
            return
        except RejectedInputError as error:
            outcome.dead_letters.append(DeadLetter(message, str(error)))
            return
        outcome.add(Outcome.STARTED, [message])
        logger.info(
            "started",
            extra={"execution": name, "message_id": message.message_id, "group": message.group_id},
        )

    def _expire(self, start: Expiring, outcome: GroupOutcome) -> None:
        """A job received again after its deadline: found started before, or dead-lettered as expired.

        `DescribeExecution` says whether a tick started it (a delete failed, a tick died): one
        of its name with another input is another job's. A start recorded within the review
        window that doesn't show yet is left to a later tick. Never started now (no call).
        """
        message, name = start.message, start.name
        outcome.attempted.discard(name)
        state = self.admissions.state_of(name)
        if state is not None and (state.input is None or same_input(state.input, message.body)):
            outcome.add(Outcome.ALREADY, [message])
            logger.info("already started", extra={"execution": name, "message_id": message.message_id})
        elif state is None and self.in_window(self.admissions.arn, name):
            # Started within the review window, it may not show yet: decide once it would.
            raise NotYetError(f"{name} was recorded as starting lately; DescribeExecution shows it not yet")
        else:
            outcome.dead_letters.append(start.letter)

    def _redrive(self, start: Redrive, outcome: GroupOutcome) -> None:
        """Continue a closed execution from its failed state, unless that was done already.

        The execution's status and ``redriveCount`` tell whether this job's redrive
        happened (a redelivery after a crash): it never happens twice. A read that lags
        behind the redrive is covered by the client token, the same for every attempt.
        """
        state_machine = self.admissions
        message, name = start.message, start.name
        state = state_machine.state_of(name)
        decision = redrive_decision(
            None if state is None else state.status,
            0 if state is None else state.redrive_count,
            start,
            self.clock(),
        )
        if decision.verdict is RedriveVerdict.DONE:
            outcome.add(Outcome.ALREADY, [message])
            logger.info("already redriven", extra={"execution": name, "message_id": message.message_id})
            return
        if decision.verdict is RedriveVerdict.WAIT:
            raise NotYetError(
                f"DescribeExecution({name}) shows a state older than the redrive job's"
                + (" (no execution yet)" if state is None else "")
            )
        if decision.verdict is RedriveVerdict.REFUSE:
            outcome.dead_letters.append(DeadLetter(message, decision.reason))
            return
        token = redrive_token(execution_arn(state_machine.arn, name), start.redrive_count)
        try:
            state_machine.redrive(name, token)
        except RejectedInputError as error:
            outcome.dead_letters.append(DeadLetter(message, str(error)))
            return
        outcome.add(Outcome.STARTED, [message])
        outcome.add(Outcome.REDRIVEN, [message])
        logger.info(
            "redriven",
            extra={"execution": name, "message_id": message.message_id, "group": message.group_id},
        )
