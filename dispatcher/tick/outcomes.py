"""What became of a round's messages: by group, and for a member's whole round, by outcome."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from dispatcher.core.admission import DeadLetter
from dispatcher.core.counting import LedgerStart
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.outcomes import Counts, Outcome
from dispatcher.core.rosters import RosterEntry


@dataclass
class GroupOutcome:
    """What became of the messages of one message group in one round, by outcome (`Outcome`).

    A dead letter carries its reason (``dead_letters``); every other outcome, its messages.
    """

    messages: dict[Outcome, list[QueuedMessage]] = field(default_factory=lambda: defaultdict(list))
    dead_letters: list[DeadLetter] = field(default_factory=list)
    attempted: set[str] = field(default_factory=set)
    """Names `StartExecution` (or `SendTaskSuccess`) was called for: their records must stay."""
    stop_reason: str | None = None

    def add(self, outcome: Outcome, messages: Iterable[QueuedMessage]) -> None:
        """These messages had this outcome."""
        self.messages[outcome].extend(messages)

    def of(self, outcome: Outcome) -> list[QueuedMessage]:
        """The messages that had this outcome (a dead letter's: ``dead_letters``)."""
        return self.messages[outcome]

    @property
    def waiting(self) -> list[QueuedMessage]:
        """The messages that wait for a later round (shown again)."""
        return self.messages[Outcome.WAITING]

    def done(self) -> list[QueuedMessage]:
        """The messages that leave their queue: their calls took or were made before, or they are poison."""
        return [message for outcome in LEAVING for message in self.messages[outcome]] + [
            letter.message for letter in self.dead_letters
        ]

    def counts(self, *, delete_failures: int = 0) -> Counts:
        """How many had each outcome."""
        counts = Counts({outcome: len(messages) for outcome, messages in self.messages.items()})
        counts[Outcome.EXPIRED] = counts[Outcome.DEAD_LETTERED] = 0
        counts.update(letter.outcome for letter in self.dead_letters)
        counts[Outcome.DELETE_FAILED] = delete_failures
        return counts


LEAVING = (Outcome.STARTED, Outcome.ALREADY, Outcome.REFUSED, Outcome.CANCELLED)
"""The outcomes of messages deleted once the round is done, beside its dead letters, in that order."""


@dataclass
class RoundOutcome(GroupOutcome):
    """What became of one round of received messages."""

    recorded: list[LedgerStart] = field(default_factory=list)
    """Its starts recorded in the ledger this round (a lane's)."""
    entered: list[RosterEntry] = field(default_factory=list)
    """Its entries written in its roster this round (a gate's admissions, a tenant lane's starts)."""
    rate_spent: bool = False
    """The lane's start rate granted fewer starts than the round had: its jobs wait for it."""
    unsettled: list[QueuedMessage] = field(default_factory=list)
    """Of the done messages, those to leave on the queue (shown again, not deleted): they come back."""
    held_for_group: list[QueuedMessage] = field(default_factory=list)
    """Of those waiting: the first job of each group at its limit, to hold in flight (`GroupBook.hold`)."""
    undeleted: list[QueuedMessage] = field(default_factory=list)
    """Of the done messages, those whose delete failed: they come back."""

    def merge(self, group: GroupOutcome) -> None:
        """Add one group's outcome."""
        for outcome, messages in group.messages.items():
            self.messages[outcome] += messages
        self.dead_letters += group.dead_letters
        self.attempted |= group.attempted
        self.stop_reason = self.stop_reason or group.stop_reason

    def never_started(self) -> tuple[list[LedgerStart], list[RosterEntry]]:
        """Starts and entries of this round whose call was never made: they can go at once."""
        return (
            [start for start in self.recorded if start.name not in self.attempted],
            [entry for entry in self.entered if entry.name not in self.attempted],
        )
