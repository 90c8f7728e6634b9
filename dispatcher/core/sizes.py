"""A job's size: how many of its pool's slots it takes, and what the dispatcher keeps of it.

Step Functions doesn't know a job's size, so the dispatcher keeps each sized execution's
(a size above 1) in the state table from just before its start until it is known to have
ended: every count weighs the executions it counts with it. A round's sized starts of one
pool are one small item, a *pack*, deleted whole once all of them ended. A job without
``Slots`` takes one slot and is kept nowhere. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SizeEntry:
    """One sized execution as its pool's packs keep it."""

    slots: int
    recorded_at: float
    """When it was written, just before its start (a start that never happened stops mattering)."""
    pack: str = field(default="", compare=False)
    """The key of the pack that holds it, as read back ("" before it is written)."""


def machine_name(state_machine_arn: str) -> str:
    """A state machine's name, from its ARN (names are unique in an account and region)."""
    return state_machine_arn.rpartition(":")[2]


def size_key(state_machine_arn: str, name: str) -> str:
    """An execution's key in its pool's item: its state machine's name and its own (neither holds ``:``)."""
    return f"{machine_name(state_machine_arn)}:{name}"


def sizes_of(entries: Mapping[str, SizeEntry], state_machine_arn: str) -> dict[str, int]:
    """Execution name → slots, of one state machine's sized executions among a pool's ``entries``."""
    prefix = machine_name(state_machine_arn) + ":"
    return {key.removeprefix(prefix): entry.slots for key, entry in entries.items() if key.startswith(prefix)}


def pooled_sizes(pools: Mapping[str, Mapping[str, SizeEntry]], state_machine_arn: str) -> dict[str, int]:
    """`sizes_of` over every pool's entries (a state machine is in one pool, but its pool isn't asked)."""
    found: dict[str, int] = {}
    for entries in pools.values():
        found.update(sizes_of(entries, state_machine_arn))
    return found


def weight(sizes: Mapping[str, int], names: Iterable[str]) -> int:
    """The slots these executions take (one each, unless ``sizes`` says more)."""
    return sum(sizes.get(name, 1) for name in names)


def stale_keys(
    entries: Mapping[str, SizeEntry],
    counted: Mapping[str, frozenset[str] | None],
    oldest: float,
) -> list[str]:
    """The keys of a pool's entries whose executions are known not to run: they may go.

    ``counted``: each of the pool's state machines (by ARN) → the executions its count
    found holding a slot (None: a count that stopped at MAX, which says nothing of the
    others). An entry goes once its execution is not among them and it was written before
    ``oldest`` (the count's review window: a younger start may not show yet); an entry of a
    state machine not counted stays.
    """
    by_machine = {machine_name(arn): names for arn, names in counted.items()}
    stale: list[str] = []
    for key, entry in entries.items():
        machine, _, name = key.partition(":")
        names = by_machine.get(machine)
        if names is None or name in names:
            continue
        if entry.recorded_at < oldest:
            stale.append(key)
    return stale


def stale_packs(entries: Mapping[str, SizeEntry], stale: Collection[str]) -> list[str]:
    """The packs whose every entry is stale (`stale_keys`): each goes whole, one delete.

    A pack with an entry still running, or not known to have ended, stays: its stale entries
    weigh nothing meanwhile (a count weighs only the executions it finds running).
    """
    kept = {entry.pack for key, entry in entries.items() if key not in stale}
    return sorted({entry.pack for key, entry in entries.items() if entry.pack and entry.pack not in kept})


def too_large(slots: int, limits: Iterable[tuple[int | None, str]]) -> str | None:
    """Why a job of ``slots`` can never start (a ``DispatchError`` beginning ``too large:``), or None.

    ``limits``: each limit that can't grow and whose it is (``pool glue``, ``lane A``,
    ``max_per_group``), None where there is none. A limit of 0 is a pause, not a size.
    """
    for limit, whose in limits:
        if limit and slots > limit:
            return f"too large: {slots} slots, {whose} allows {limit}"
    return None


@dataclass(frozen=True)
class Reservation:
    """A large job that found too few free slots: its pool's freed slots are kept for it until it fits."""

    lane: str
    name: str
    """The job's execution name (its lane's)."""
    slots: int
    since: float
    """When a tick first found it short."""


def reservation_after(
    current: Reservation | None,
    short: Mapping[str, tuple[str, int]],
    priority_of: Mapping[str, int],
    now: float,
) -> Reservation | None:
    """A pool's reservation once a tick found these jobs short (lane → the first one's name and size).

    One reservation a pool: a lane's large job replaces the current one only from a lane of a
    higher priority (lanes of higher priority go first anyway); otherwise the first found stays.
    """
    chosen = current
    for lane, (name, slots) in short.items():
        if lane not in priority_of:
            continue
        if chosen is None or (chosen.lane in priority_of and priority_of[lane] > priority_of[chosen.lane]):
            chosen = Reservation(lane, name, slots, now)
    return chosen


@dataclass
class CheckedCount:
    """A count as its recorded starts are checked (`plan_count`'s `to_check`): the slots held, by whom."""

    running: int
    names: set[str]
    executions: int
    complete: bool
    """Whether ``names`` are all that hold a slot (False: counting stopped at MAX)."""

    def add(self, name: str, sizes: Mapping[str, int]) -> None:
        """One more execution holds its slots."""
        self.running += sizes.get(name, 1)
        self.executions += 1
        self.names.add(name)

    def add_all(self, names: Iterable[str], sizes: Mapping[str, int]) -> None:
        """These hold their slots, unchecked."""
        for name in names:
            self.add(name, sizes)
