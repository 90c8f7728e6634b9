"""Admission: which received messages a round starts, dead-letters and releases, and in what order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from dispatcher.core.executions import input_problem, name_problem
from dispatcher.core.messages import (
    DISPATCH_ACTION_ATTRIBUTE,
    EXECUTION_NAME_ATTRIBUTE,
    REDRIVE_ACTION,
    REDRIVE_COUNT_ATTRIBUTE,
    SLOTS_ATTRIBUTE,
    START_ACTION,
    QueuedMessage,
    parse_slots,
)
from dispatcher.core.outcomes import Outcome


@dataclass(frozen=True)
class Start:
    """Start an execution with this name and the message body as input (a gate's admission: `Enter`).

    The decisions a round makes calls for are its kinds: a `Start`, a `Redrive`, an
    `Expiring`, an `Enter`; each says what its call is. A `Cancelled` one makes none.
    """

    message: QueuedMessage
    name: str
    slots: int = field(default=1, kw_only=True)
    """How many of its pool's slots it takes (its ``Slots`` attribute; a gate's admission: 1)."""
    unmade: ClassVar[Outcome | None] = None
    """The outcome of a decision whose call is never made (None: it is made)."""


@dataclass(frozen=True)
class Redrive(Start):
    """Redrive closed execution ``name`` instead of starting one (`RedriveExecution`)."""

    redrive_count: int
    """The execution's ``redriveCount`` when the redrive was asked for: it is redriven once."""


@dataclass(frozen=True)
class Expiring(Start):
    """A job received again after its deadline: it may have been started before, and never starts now.

    Found started (a delete failed, a tick died), it is done; else it is dead-lettered (``letter``).
    """

    letter: DeadLetter


@dataclass(frozen=True)
class Cancelled(Start):
    """A job admitted this round that its producer cancelled, as the round's screen found: no call is made.

    It keeps its place among its group's starts (a throttle before it leaves it waiting, as
    the later ones), and leaves its queue once the round is done.
    """

    unmade: ClassVar[Outcome | None] = Outcome.CANCELLED


@dataclass(frozen=True)
class DeadLetter:
    """The message can never start: send it to the DLQ with this reason (`Outcome.DEAD_LETTERED`)."""

    message: QueuedMessage
    reason: str
    outcome: ClassVar[Outcome] = Outcome.DEAD_LETTERED
    """What its message's outcome is once it is in the DLQ."""


@dataclass(frozen=True)
class Expired(DeadLetter):
    """A job received after its deadline: dead-lettered with why, counted apart from poison."""

    outcome: ClassVar[Outcome] = Outcome.EXPIRED


@dataclass(frozen=True)
class Wait:
    """The message waits for a later round: beyond the free slots, or behind its group's that waits."""

    message: QueuedMessage
    outcome: ClassVar[Outcome] = Outcome.WAITING


@dataclass(frozen=True)
class HoldForGroup(Wait):
    """The first job of a group at its limit: it waits held in flight until its group has room (`Hold`)."""

    turn: int = 0
    """When the round came to its group (fair share goes to the groups holding fewest first)."""


def plan_message(message: QueuedMessage) -> Start | Redrive | DeadLetter:
    """Validate a message and pick its execution name (the attribute, else the MessageId)."""
    problem = input_problem(message.body)
    if problem is not None:
        return DeadLetter(message, problem)
    if message.execution_name_type is None:
        name = message.message_id
    elif not message.execution_name_type.startswith("String"):
        return DeadLetter(
            message,
            f"ExecutionName attribute must be of type String, not {message.execution_name_type}",
        )
    else:
        name = message.execution_name or ""
    problem = name_problem(name)
    if problem is not None:
        return DeadLetter(message, f"invalid ExecutionName: {problem}")
    try:
        slots = parse_slots(message.attributes.get(SLOTS_ATTRIBUTE))
    except ValueError as error:
        return DeadLetter(message, f"invalid {SLOTS_ATTRIBUTE}: {error}")
    return _plan_action(message, name, slots)


def _attribute_text(message: QueuedMessage, attribute: str) -> tuple[str | None, str | None]:
    """The attribute's value and data type (None, None when absent)."""
    value = message.attributes.get(attribute)
    if value is None:
        return None, None
    return value.get("StringValue"), value.get("DataType", "")


def _plan_action(message: QueuedMessage, name: str, slots: int) -> Start | Redrive | DeadLetter:
    """A start, or a redrive of execution ``name`` when ``DispatchAction`` says so (each of ``slots``)."""
    action, action_type = _attribute_text(message, DISPATCH_ACTION_ATTRIBUTE)
    if action_type is None or (action_type.startswith("String") and action == START_ACTION):
        return Start(message, name, slots=slots)
    count, _ = _attribute_text(message, REDRIVE_COUNT_ATTRIBUTE)
    problem = _redrive_problem(message, action, action_type, count)
    if problem is not None or count is None:
        return DeadLetter(message, problem or "")
    return Redrive(message, name, redrive_count=int(count), slots=slots)


def _redrive_problem(
    message: QueuedMessage, action: str | None, action_type: str, count: str | None
) -> str | None:
    """Why a message that isn't a plain start can't be a redrive either, or None."""
    if not action_type.startswith("String"):
        return f"{DISPATCH_ACTION_ATTRIBUTE} attribute must be of type String, not {action_type}"
    if action != REDRIVE_ACTION:
        return f"{DISPATCH_ACTION_ATTRIBUTE} must be {START_ACTION!r} or {REDRIVE_ACTION!r}, not {action!r}"
    if message.execution_name_type is None:
        return f"a redrive needs the {EXECUTION_NAME_ATTRIBUTE} attribute: the execution to redrive"
    if count is None or not count.strip().isdigit():
        return (
            f"a redrive needs the {REDRIVE_COUNT_ATTRIBUTE} attribute: the execution's redriveCount"
            f" (an integer >= 0) when the redrive was asked for, not {count!r}"
        )
    return None


@dataclass(frozen=True)
class Admission:
    """What one round does with the messages it received, decided before any call."""

    starts: tuple[Start, ...]
    """At most the free slots, in receive order: record these, then start them."""
    dead_letters: tuple[DeadLetter, ...]
    waits: tuple[Wait, ...]
    """Beyond the free slots, behind a held-back message of the same group, or held for its group."""
    short: tuple[Start, ...] = ()
    """Of those waiting: the starts that found some free slots but fewer than their size, in receive order."""

    @property
    def waiting(self) -> tuple[QueuedMessage, ...]:
        """The messages that wait, in receive order."""
        return tuple(wait.message for wait in self.waits)

    @property
    def held_for_group(self) -> tuple[QueuedMessage, ...]:
        """Of those waiting: the first job of each group at its limit (to hold in flight)."""
        held = sorted(
            (wait.turn, index) for index, wait in enumerate(self.waits) if isinstance(wait, HoldForGroup)
        )
        return tuple(self.waits[index].message for _, index in held)


Plan = Callable[[QueuedMessage], "Start | DeadLetter | None"]
"""What one message asks for: a start (or an admission), poison, or None to wait for a later round."""


def admit(  # noqa: PLR0913 — each is one input of the decision
    messages: Iterable[QueuedMessage],
    free: int,
    plan: Plan = plan_message,
    takes_slot: Callable[[Start], bool] = lambda start: True,
    *,
    max_starts: int | None = None,
    hold: tuple[str, int] | None = None,
) -> Admission:
    """Pick the messages a round starts, dead-letters and releases, in receive order.

    ``free`` is in slots: a start takes its size (`Start.slots`) unless ``takes_slot``
    says its execution already holds its place (a gate's request for an execution inside).
    A job larger than what is left waits (`Admission.short` names the first such one).
    Poison waits behind a full cap like any other message; once one message of a group is
    held back, the later ones of that group are held back too, or they would start first.
    ``max_starts``: at most this many starts (a start rate's tokens), whatever their sizes.
    ``hold``: a reserved job's name and size: the others take only what is free beyond it
    until it is admitted.
    """
    starts: list[Start] = []
    dead_letters: list[DeadLetter] = []
    waiting: list[Wait] = []
    short: list[Start] = []
    order = GroupOrder()
    slots = 0
    for message in messages:
        decision = plan(message) if order.may_start(message) else None
        decision = within_starts(decision, max_starts, len(starts))
        needs = slots_needed(decision, takes_slot)
        if decision is None or not fits(needs, slots, free - held_for(hold, decision)):
            short += [decision] if isinstance(decision, Start) and slots < free else []
            order.wait(message)
            waiting.append(Wait(message))
        elif isinstance(decision, DeadLetter):
            dead_letters.append(decision)
        else:
            starts.append(decision)
            slots += needs
            hold = after_hold(hold, decision)
    return Admission(tuple(starts), tuple(dead_letters), tuple(waiting), tuple(short))


def within_starts(
    decision: Start | DeadLetter | None, max_starts: int | None, made: int
) -> Start | DeadLetter | None:
    """The decision, unless it is a start beyond ``max_starts`` (a rate's tokens): then it waits (None)."""
    if isinstance(decision, Start) and max_starts is not None and made >= max_starts:
        return None
    return decision


def fits(needs: int, taken: int, free: int) -> bool:
    """Whether ``needs`` slots fit beside ``taken`` in ``free`` (poison needs 1 to look)."""
    return not needs or taken + max(1, needs) <= free


def after_hold(hold: tuple[str, int] | None, admitted: Start | DeadLetter) -> tuple[str, int] | None:
    """The hold once ``admitted`` is taken: gone when it is the reserved job."""
    if hold is not None and isinstance(admitted, Start) and admitted.name == hold[0]:
        return None
    return hold


def held_for(hold: tuple[str, int] | None, decision: Start | DeadLetter | None) -> int:
    """The slots a decision must leave free for a reserved job (none for the reserved job itself)."""
    if hold is None or (isinstance(decision, Start) and decision.name == hold[0]):
        return 0
    return hold[1]


def slots_needed(decision: Start | DeadLetter | None, takes_slot: Callable[[Start], bool]) -> int:
    """The slots a decision takes: a start its size (0 when its execution already holds its place).

    Poison takes none, but like a start waits behind a full cap (it counts 1 for the check).
    """
    if isinstance(decision, Start):
        return decision.slots if takes_slot(decision) else 0
    return 1


def by_group(starts: Iterable[Start]) -> list[list[Start]]:
    """Starts split into one sequence per message group, each in receive (send) order.

    The sequences may run concurrently; the starts of one sequence run one after another.
    """
    groups: dict[str, list[Start]] = {}
    for start in starts:
        groups.setdefault(start.message.group_id, []).append(start)
    return list(groups.values())


@dataclass
class GroupOrder:
    """Keeps send order within each message group while a batch is being admitted.

    Once one message of a group waits, the later messages of that group received
    in the same tick must wait too, or they would start first.
    """

    blocked_groups: set[str] = field(default_factory=set)

    def may_start(self, message: QueuedMessage) -> bool:
        """True unless an earlier message of the same group waits."""
        return message.group_id not in self.blocked_groups

    def wait(self, message: QueuedMessage) -> None:
        """Record that this message waits, and its group's later ones behind it, for the tick."""
        self.blocked_groups.add(message.group_id)
