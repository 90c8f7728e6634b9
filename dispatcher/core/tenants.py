"""Tenants: a member's slots shared among message groups — a limit per group, and fair share.

In a FIFO lane a message group is a tenant. A member with ``max_per_group`` never has more
than that many slots of one group held by its executions (for a gate: inside it, each 1;
a lane's job takes its size, `dispatcher.core.sizes`); one with ``fair_share`` hands scarce
free slots first to the groups holding fewest. Each group's slots come from the member's
roster (its executions and their sizes, kept until Step Functions or an event says they
ended), never from a window that expires.

A job whose group lacks room for it is *held*: its message stays in flight for
`HOLD_SECONDS`, which blocks its group (FIFO hands out nothing of a group while one of its
messages is in flight) without touching the others, and is made visible again as soon as
its group has room for its size (so the group's freed slots are kept for it: its later
jobs wait behind it). So its receive count grows by one per `HOLD_SECONDS` at
most while its group stays at its limit. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from dispatcher.core.admission import (
    Admission,
    DeadLetter,
    GroupOrder,
    HoldForGroup,
    Plan,
    Start,
    Wait,
    admit,
    after_hold,
    fits,
    held_for,
    plan_message,
    slots_needed,
    within_starts,
)
from dispatcher.core.messages import QueuedMessage

HOLD_SECONDS = 4 * 3600
"""How long a held job stays in flight before SQS hands it out again (if its group is still at
its limit, it is held again): at most one receive per 4 hours of waiting, 84 in the queue's
14 days of retention, below the template's `MaxReceiveCount` of 100. It is shown again at
once when its group drops below its limit."""
PASSED_OVER_RECEIVES = 30
"""A job fair share passed over this many times (its receive count) goes first, whatever its group
holds: each pass is a receive, and SQS would move a job received `MaxReceiveCount` (100) times
to the DLQ without a reason. Aging, as schedulers do against starvation."""
FAIR_SHARE_LOOK_AHEAD = 10
"""A fair-share lane receives one batch beyond its free slots: FIFO hands out a deep group's
messages first, and the batch after them (that group in flight) shows the other groups."""


@dataclass(frozen=True)
class Share:
    """How a member shares its slots among message groups."""

    max_per_group: int | None = None
    fair_share: bool = False

    @property
    def active(self) -> bool:
        """Whether groups matter at all (else admission is the plain one)."""
        return self.max_per_group is not None or self.fair_share


@dataclass(frozen=True)
class Hold:
    """A job held because its group is at its limit: the message in flight, and how to show it again."""

    group: str
    message_id: str
    receipt_handle: str
    held_at: float
    name: str | None = None
    """The job's execution name (None: a gate's request, or a name it can't have)."""
    slots: int = 1
    """The job's size: it is shown again once its group has room for all of it."""


def held_key(group: str) -> str:
    """A held job's key in its member's roster (``~`` sorts after every execution name)."""
    return f"~held#{group}"


def due_to_show(holds: Iterable[Hold], running: Mapping[str, int], share: Share) -> list[Hold]:
    """The held jobs whose group has room for them now (or has no limit any more): show them again.

    ``running``: each group's slots held. One shown before its group has room for its size
    would only be received and held again, a receive spent for nothing.
    """
    return [hold for hold in holds if not group_full(share, running.get(hold.group, 0), hold.slots)]


Queued = tuple[int, QueuedMessage, "Start | DeadLetter"]
"""A message as a round decided it: its place in receive order, the message, the decision."""


@dataclass(frozen=True)
class GroupQueues:
    """A round's messages by message group, each group's in receive (send) order."""

    queues: dict[str, list[Queued]]
    held: frozenset[int]
    """Places of the messages that wait behind one of their group that waits (decided before it)."""


def group_queues(messages: Sequence[QueuedMessage], plan: Plan) -> GroupQueues:
    """Decide each message of a round in receive order, and queue it in its group.

    A message ``plan`` holds back (None) holds back its group's later ones.
    """
    order = GroupOrder()
    queues: dict[str, list[Queued]] = {}
    held: set[int] = set()
    for index, message in enumerate(messages):
        decision = plan(message) if order.may_start(message) else None
        if decision is None:
            order.wait(message)
            held.add(index)
            continue
        queues.setdefault(message.group_id, []).append((index, message, decision))
    return GroupQueues(queues, frozenset(held))


@dataclass(frozen=True)
class Picked:
    """What a round takes of its group queues: the places chosen, and each group's job held for its limit."""

    chosen: frozenset[int]
    held_for_group: tuple[QueuedMessage, ...]
    short: tuple[Start, ...] = ()
    """The starts that found some free slots but fewer than their size (`Admission.short`)."""


def group_full(share: Share, holding: int, needs: int = 1) -> bool:
    """Whether a group holding ``holding`` slots lacks room for ``needs`` more (1: it is at its limit)."""
    return share.max_per_group is not None and holding + needs > share.max_per_group


def _advance(heads: dict[str, int], group: str, length: int) -> None:
    """Move a group's head to its next job; a group whose jobs are all taken leaves the turn."""
    heads[group] += 1
    if heads[group] == length:
        del heads[group]


def _group_slots(decision: Start | DeadLetter, needs: int) -> int:
    """The slots of its group a decision takes: a start's size (poison: none; a start already holding: 0)."""
    return needs if isinstance(decision, Start) else 0


def _at_limit(decision: Start | DeadLetter, needs: int, share: Share, holding: int) -> bool:
    """Whether a start of ``needs`` slots would take its group (holding ``holding``) past its limit."""
    return isinstance(decision, Start) and needs > 0 and group_full(share, holding, needs)


def pick(  # noqa: PLR0913, PLR0917 — each is one input of the pick
    queues: Mapping[str, Sequence[Queued]],
    free: int,
    share: Share,
    running: Mapping[str, int],
    takes_slot: Callable[[Start], bool],
    max_starts: int | None = None,
    hold: tuple[str, int] | None = None,
) -> Picked:
    """Take the groups' heads one at a time (`_next_group`) until the free slots are spent or none can go.

    A group's head that would take it past its limit is held for the group (its later jobs
    wait behind it); a head that needs a slot when none is left ends its group's turn. Poison
    and a request for an execution inside need no slot. ``running`` and what is given are
    in slots; ``max_starts`` counts starts.
    """
    given: Counter[str] = Counter()
    made = 0
    chosen: set[int] = set()
    held_for_group: list[QueuedMessage] = []
    short: list[Start] = []
    slots = 0
    heads = dict.fromkeys(queues, 0)
    while heads:
        group = _next_group(heads, queues, running, given, fair=share.fair_share)
        index, message, decision = queues[group][heads[group]]
        needs = slots_needed(decision, takes_slot)
        at_limit = _at_limit(decision, needs, share, running.get(group, 0) + given[group])
        refused = at_limit or within_starts(decision, max_starts, made) is None
        if refused or not fits(needs, slots, free - held_for(hold, decision)):
            short += [decision] if isinstance(decision, Start) and not refused and slots < free else []
            held_for_group += [message] if at_limit else []
            del heads[group]  # the group's later jobs wait behind this one
            continue
        chosen.add(index)
        slots += needs
        hold = after_hold(hold, decision)
        taken = _group_slots(decision, needs)
        given[group] += taken
        made += taken > 0
        _advance(heads, group, len(queues[group]))
    return Picked(frozenset(chosen), tuple(held_for_group), tuple(short))


def admit_shared(  # noqa: PLR0913 — each is one input of the decision
    messages: Sequence[QueuedMessage],
    free: int,
    share: Share,
    running: Mapping[str, int],
    *,
    plan: Plan = plan_message,
    takes_slot: Callable[[Start], bool] = lambda start: True,
    max_starts: int | None = None,
    hold: tuple[str, int] | None = None,
) -> Admission:
    """`admit`, with each group's limit, and with fair share the free slots to the groups holding fewest.

    ``running``: each group's slots held by the member's executions now (this tick's
    starts included). The messages of one group keep their receive (send) order: a
    group's job that waits holds back its later ones. Without fair share, the slots go
    in receive order; with it, one at a time to the group with fewest (running and given
    this round), ties to the group received first; a job passed over `PASSED_OVER_RECEIVES`
    times goes first. Work-conserving: a slot no group below its limit can use is left
    only when none can.
    """
    if not share.active:
        return admit(messages, free, plan, takes_slot, max_starts=max_starts, hold=hold)
    queued = group_queues(messages, plan)
    picked = pick(queued.queues, free, share, running, takes_slot, max_starts, hold)
    return _admission(messages, queued.queues, picked)


def _admission(
    messages: Sequence[QueuedMessage], queues: Mapping[str, Sequence[Queued]], picked: Picked
) -> Admission:
    """What was picked, in receive order; the rest waits."""
    decisions = sorted(
        (index, decision)
        for queue in queues.values()
        for index, _, decision in queue
        if index in picked.chosen
    )
    return Admission(
        tuple(decision for _, decision in decisions if isinstance(decision, Start)),
        tuple(decision for _, decision in decisions if isinstance(decision, DeadLetter)),
        _waits(messages, picked),
        picked.short,
    )


def _waits(messages: Sequence[QueuedMessage], picked: Picked) -> tuple[Wait, ...]:
    """What was not picked, in receive order: each group's job held for its limit, in its turn, or a wait."""
    turns = {message.message_id: turn for turn, message in enumerate(picked.held_for_group)}
    return tuple(
        HoldForGroup(message, turns[message.message_id]) if message.message_id in turns else Wait(message)
        for index, message in enumerate(messages)
        if index not in picked.chosen
    )


def _next_group(
    heads: Mapping[str, int],
    queues: Mapping[str, Sequence[Queued]],
    running: Mapping[str, int],
    given: Mapping[str, int],
    *,
    fair: bool,
) -> str:
    """Whose job is decided next: the group received first, or with fair share the one holding fewest."""

    def position(group: str) -> int:
        return queues[group][heads[group]][0]

    if not fair:
        return min(heads, key=position)

    def fewest(group: str) -> tuple[bool, int, int]:
        aged = queues[group][heads[group]][1].receive_count >= PASSED_OVER_RECEIVES
        return not aged, running.get(group, 0) + given.get(group, 0), position(group)

    return min(heads, key=fewest)
