"""Handing a pool's free slots to its lanes: priorities first, equal shares within one.

A tick learns what a lane can use only by receiving from its queue, so the allocation
runs in passes: each pass offers the lanes of the highest priority that can still start
an equal share of what is free (`share`); a lane that used less than its share (its queue
drained, its jobs wait, its own MAX or rate is spent) is `spent` for the rest of the tick,
and what it left goes to the other lanes of its priority in the next pass, then to lower
priorities. So a lane starts nothing while a lane of higher priority in its pool could
still use a slot, lanes of equal priority with enough jobs each get at least ⌊F/k⌋, and no
slot stays idle while some lane could use it. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dispatcher.core.batching import ROUND_SIZE, SQS_BATCH_LIMIT

UNBOUNDED = 1 << 62
"""The room of a lane with no ceiling of its own: the pool's free slots bind."""


@dataclass(frozen=True)
class Claim:
    """What one lane may take this tick, before its queue was read."""

    lane: str
    priority: int
    room: int = UNBOUNDED
    """Starts it may make now: its own MAX less its RUNNING, its rate's tokens (0: paused)."""


def share(free: int, rooms: Mapping[str, int]) -> dict[str, int]:
    """Split ``free`` slots among lanes as equally as their rooms allow (max-min fair).

    The lanes with least so far are raised together, level by level, a lane leaving once
    its room is full; the last indivisible slots go to the lanes first in ``rooms``' order.
    The result never sums above ``free``, never gives a lane more than its room, and
    leaves no slot idle that some lane has room for.
    """
    given = dict.fromkeys(rooms, 0)
    left = max(0, free)
    while left > 0:
        open_lanes = [lane for lane in rooms if given[lane] < rooms[lane]]
        if not open_lanes:
            break
        low = min(given[lane] for lane in open_lanes)
        lowest = [lane for lane in open_lanes if given[lane] == low]
        ceilings = [rooms[lane] for lane in lowest]
        ceilings += [given[lane] for lane in open_lanes if given[lane] > low]
        step = min(min(ceilings) - low, left // len(lowest))
        if step == 0:  # fewer slots left than lanes at the lowest level
            for lane in lowest[:left]:
                given[lane] += 1
            break
        for lane in lowest:
            given[lane] += step
        left -= step * len(lowest)
    return given


@dataclass
class Allocation:
    """One pool's free slots over one tick: the passes, and which lanes are spent."""

    free: int
    claims: Sequence[Claim]
    spent: set[str] = field(default_factory=set)
    used: dict[str, int] = field(default_factory=dict)
    """Starts each lane made so far this tick."""

    def next_pass(self) -> dict[str, int]:
        """The shares of the next pass: lanes of the highest priority that can still start.

        Empty when nothing is free or no lane can start: the pool's tick is over.
        """
        if self.free <= 0:
            return {}
        for priority in sorted({claim.priority for claim in self.claims}, reverse=True):
            rooms = {
                claim.lane: claim.room - self.used.get(claim.lane, 0)
                for claim in self.claims
                if claim.priority == priority and claim.lane not in self.spent
            }
            # The indivisible rest goes to the lanes that started least this tick first: a
            # lane left out of an earlier pass's rest is not left out again behind one
            # whose share the queue filled.
            rooms = {
                lane: room
                for lane, room in sorted(rooms.items(), key=lambda item: self.used.get(item[0], 0))
                if room > 0
            }
            if rooms:
                shares = share(self.free, rooms)
                return {lane: given for lane, given in shares.items() if given > 0}
        return {}

    def took(self, lane: str, offered: int, started: int, *, spent: bool = False) -> None:
        """A lane made ``started`` of the ``offered`` starts; fewer (or ``spent``) ends its tick."""
        self.used[lane] = self.used.get(lane, 0) + started
        self.free -= started
        if spent or started < offered:
            self.spent.add(lane)

    def stop(self) -> None:
        """Nothing more starts in this pool this tick (a throttle, the time, an error)."""
        self.spent.update(claim.lane for claim in self.claims)


def room_of(
    max_concurrency: int | None, running: int, tokens: int | None = None, *, paused: bool = False
) -> int:
    """What a lane may start now: below its own MAX, within its rate's tokens; 0 when paused."""
    if paused:
        return 0
    room = UNBOUNDED if max_concurrency is None else max(0, max_concurrency - running)
    return room if tokens is None else min(room, max(0, tokens))


def round_parts(left: Mapping[str, int], turn: int = 0) -> dict[str, int]:
    """Each lane's part of the next round of its pass, from ``left``: what each may still start in it.

    A round holds at most `ROUND_SIZE` starts, and each lane receives its part in batches
    of 10: a part of 5 costs a receive and a delete as a part of 10 does. So the lanes with
    less than a batch left take it first (they never wait behind others' batches), the room
    left goes in whole batches, shared equally (`share`), and a lane whose every whole batch
    is in this round takes the rest of its part along, room allowing. Twenty lanes of 13
    make two receives each, not three of 5, 5 and 3. Every lane still starts all it is
    offered in the pass; only the rounds its starts fall in change. What can't be shared
    evenly goes first to the lanes with most left, then in turn: ``turn`` (the tick's)
    rotates the order, so a tick cut short after its first round favours no lane for long.
    """
    lanes = list(left)
    lanes = lanes[turn % len(lanes) :] + lanes[: turn % len(lanes)] if lanes else lanes
    left = {lane: left[lane] for lane in sorted(lanes, key=lambda lane: -left[lane])}
    parts = share(ROUND_SIZE, {lane: count for lane, count in left.items() if 0 < count < SQS_BATCH_LIMIT})
    _add_batches(parts, left)
    return {lane: count for lane, count in parts.items() if count > 0}


def _add_batches(parts: dict[str, int], left: Mapping[str, int]) -> None:
    """Share the round's room left after ``parts`` in whole batches, then the tails of lanes it finishes."""
    room = ROUND_SIZE - sum(parts.values())
    whole = {lane: count // SQS_BATCH_LIMIT for lane, count in left.items() if count >= SQS_BATCH_LIMIT}
    batches = {lane: count for lane, count in share(room // SQS_BATCH_LIMIT, whole).items() if count > 0}
    for lane, count in batches.items():
        parts[lane] = count * SQS_BATCH_LIMIT
    room = ROUND_SIZE - sum(parts.values())
    tails = {
        lane: left[lane] - parts[lane]
        for lane, count in batches.items()
        if count == whole[lane] and left[lane] > parts[lane]
    }
    for lane, count in share(room, tails).items():
        parts[lane] += count
