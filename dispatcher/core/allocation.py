"""Handing a pool's free slots to its members: priorities first, equal shares within one.

A tick learns what a member can use only by receiving from its queue, so the allocation
runs in passes: each pass offers the members of the highest priority that can still start
an equal share of what is free (`share`); a member that used less than its share (its queue
drained, its jobs wait, its own MAX or rate is spent) is `spent` for the rest of the tick,
and what it left goes to the other members of its priority in the next pass, then to lower
priorities. So a member starts nothing while a member of higher priority in its pool could
still use a slot, members of equal priority with enough jobs each get at least ⌊F/k⌋, and no
slot stays idle while some member could use it. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dispatcher.core.batching import ROUND_SIZE, SQS_BATCH_LIMIT

UNBOUNDED = 1 << 62
"""The room of a member with no ceiling of its own: the pool's free slots bind."""


@dataclass(frozen=True)
class Claim:
    """What one member may take this tick, before its queue was read."""

    member: str
    priority: int
    room: int = UNBOUNDED
    """Starts it may make now: its own MAX less its RUNNING, its rate's tokens (0: paused)."""


def share(free: int, rooms: Mapping[str, int]) -> dict[str, int]:
    """Split ``free`` slots among members as equally as their rooms allow (max-min fair).

    The members with least so far are raised together, level by level, a member leaving once
    its room is full; the last indivisible slots go to the members first in ``rooms``' order.
    The result never sums above ``free``, never gives a member more than its room, and
    leaves no slot idle that some member has room for.
    """
    given = dict.fromkeys(rooms, 0)
    left = max(0, free)
    while left > 0:
        open_lanes = [member for member in rooms if given[member] < rooms[member]]
        if not open_lanes:
            break
        low = min(given[member] for member in open_lanes)
        lowest = [member for member in open_lanes if given[member] == low]
        ceilings = [rooms[member] for member in lowest]
        ceilings += [given[member] for member in open_lanes if given[member] > low]
        step = min(min(ceilings) - low, left // len(lowest))
        if step == 0:  # fewer slots left than members at the lowest level
            for member in lowest[:left]:
                given[member] += 1
            break
        for member in lowest:
            given[member] += step
        left -= step * len(lowest)
    return given


@dataclass(frozen=True)
class Reserve:
    """Slots kept for a large job of ``member`` that found too few free (`dispatcher.core.sizes`)."""

    member: str
    slots: int
    alone: bool = False
    """Larger than its adaptive pool's limit L (within MAX), and the pool runs nothing: it starts alone."""


@dataclass
class Allocation:
    """One pool's free slots over one tick: the passes, and which members are spent.

    With a reservation (``reserved``), members of the reserved member's priority and lower
    get only what is free beyond its size, and nothing while less than its size is free; the
    reserved member gets its size on top of its share, once. Where the member's own room is
    what lacks, only that member waits. Higher priorities go first as ever.
    """

    free: int
    claims: Sequence[Claim]
    spent: set[str] = field(default_factory=set)
    used: dict[str, int] = field(default_factory=dict)
    """Slots each member took so far this tick."""
    reserved: Reserve | None = None
    reserve_offered: bool = False
    """Whether a pass offered the reserved member its size (its job started then, or didn't come)."""
    held: int = 0
    """Free slots kept idle for the reservation when the passes ended (fewer than its size)."""
    went_alone: bool = False
    """A job above the pool's limit had its pass alone: nothing else starts this tick, started or not."""

    def next_pass(self) -> dict[str, int]:
        """The shares of the next pass: members of the highest priority that can still start.

        Empty when nothing is free or no member can start: the pool's tick is over.
        """
        if self.reserved is not None and self.reserved.alone:
            return self._alone(self.reserved)
        if self.free <= 0 or self.went_alone:
            return {}
        reserve = self._reserve()
        for priority in sorted({claim.priority for claim in self.claims}, reverse=True):
            rooms = self._rooms_at(priority)
            if reserve is not None and priority <= reserve[1]:
                return self._reserved_pass(rooms, reserve[0])
            if rooms:
                return _given(share(self.free, rooms))
        return {}

    def _reserve(self) -> tuple[Reserve, int] | None:
        """The reservation that binds this pass, and its member's priority (None: none binds)."""
        reserved = self.reserved
        claim = next((claim for claim in self.claims if reserved and claim.member == reserved.member), None)
        if reserved is None or claim is None or claim.member in self.spent:
            return None
        return reserved, claim.priority

    def _reserved_pass(self, rooms: dict[str, int], reserved: Reserve) -> dict[str, int]:
        """A pass at or below the reserved member's priority: its size kept, on top of its share."""
        own = rooms.pop(reserved.member, 0)
        if own < reserved.slots:
            # Its own MAX is what lacks: only it waits; the pool's slots go to the others.
            self.spent.add(reserved.member)
            return _given(share(self.free, rooms))
        if self.free < reserved.slots:
            self.held = self.free  # the pool's freed slots are kept: at most its size - 1 idle
            return {}
        rooms[reserved.member] = own - reserved.slots
        shares = share(self.free - reserved.slots, rooms)
        shares[reserved.member] += reserved.slots
        self.reserved = None  # offered once: its member's rounds start it, or it is found gone
        self.reserve_offered = True
        return _given(shares)

    def _alone(self, reserved: Reserve) -> dict[str, int]:
        """A job larger than the pool's limit, the pool running nothing: it alone, once."""
        self.reserved = None
        if reserved.member in self.spent:
            return {}
        self.free, self.reserve_offered, self.went_alone = reserved.slots, True, True
        return {reserved.member: reserved.slots}

    def _rooms_at(self, priority: int) -> dict[str, int]:
        """The room left to the members of ``priority`` that can still start, least started first.

        The indivisible rest goes to the members that started least this tick first: a
        member left out of an earlier pass's rest is not left out again behind one whose
        share the queue filled.
        """
        rooms = {
            claim.member: claim.room - self.used.get(claim.member, 0)
            for claim in self.claims
            if claim.priority == priority and claim.member not in self.spent
        }
        return {
            member: room
            for member, room in sorted(rooms.items(), key=lambda item: self.used.get(item[0], 0))
            if room > 0
        }

    def took(self, member: str, offered: int, started: int, *, spent: bool = False) -> None:
        """A member made ``started`` of the ``offered`` starts; fewer (or ``spent``) ends its tick."""
        self.used[member] = self.used.get(member, 0) + started
        self.free -= started
        if spent or started < offered:
            self.spent.add(member)

    def stop(self) -> None:
        """Nothing more starts in this pool this tick (a throttle, the time, an error)."""
        self.spent.update(claim.member for claim in self.claims)


def _given(shares: Mapping[str, int]) -> dict[str, int]:
    """The members a pass offers anything."""
    return {member: given for member, given in shares.items() if given > 0}


def room_of(
    max_concurrency: int | None, running: int, tokens: int | None = None, *, paused: bool = False
) -> int:
    """What a member may start now: below its own MAX, within its rate's tokens; 0 when paused."""
    if paused:
        return 0
    room = UNBOUNDED if max_concurrency is None else max(0, max_concurrency - running)
    return room if tokens is None else min(room, max(0, tokens))


def round_parts(left: Mapping[str, int], turn: int = 0) -> dict[str, int]:
    """Each member's part of the next round of its pass, from ``left``: what each may still start in it.

    A round holds at most `ROUND_SIZE` starts, and each member receives its part in batches
    of 10: a part of 5 costs a receive and a delete as a part of 10 does. So the members with
    less than a batch left take it first (they never wait behind others' batches), the room
    left goes in whole batches, shared equally (`share`), and a member whose every whole batch
    is in this round takes the rest of its part along, room allowing. Twenty members of 13
    make two receives each, not three of 5, 5 and 3. Every member still starts all it is
    offered in the pass; only the rounds its starts fall in change. What can't be shared
    evenly goes first to the members with most left, then in turn: ``turn`` (the tick's)
    rotates the order, so a tick cut short after its first round favours no member for long.
    """
    members = list(left)
    members = members[turn % len(members) :] + members[: turn % len(members)] if members else members
    left = {member: left[member] for member in sorted(members, key=lambda member: -left[member])}
    parts = share(
        ROUND_SIZE, {member: count for member, count in left.items() if 0 < count < SQS_BATCH_LIMIT}
    )
    _add_batches(parts, left)
    return {member: count for member, count in parts.items() if count > 0}


def _add_batches(parts: dict[str, int], left: Mapping[str, int]) -> None:
    """Share the round's room left after ``parts`` in whole batches, then the tails of members it finishes."""
    room = ROUND_SIZE - sum(parts.values())
    whole = {member: count // SQS_BATCH_LIMIT for member, count in left.items() if count >= SQS_BATCH_LIMIT}
    batches = {member: count for member, count in share(room // SQS_BATCH_LIMIT, whole).items() if count > 0}
    for member, count in batches.items():
        parts[member] = count * SQS_BATCH_LIMIT
    room = ROUND_SIZE - sum(parts.values())
    tails = {
        member: left[member] - parts[member]
        for member, count in batches.items()
        if count == whole[member] and left[member] > parts[member]
    }
    for member, count in share(room, tails).items():
        parts[member] += count
