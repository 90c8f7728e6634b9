"""Spending one tick's free slots: pass after pass over every pool, rounds over each pass's members.

Each pool's `Allocation` hands its free slots out in passes (priorities first, equal
shares within one); the members of a pass, of every pool, share its rounds (`Round`), so a
tick over twenty members takes about as long as over one. A member that stopped leaves the
rounds; a stop on AWS's quotas or the invocation's time stops every member.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dispatcher.core.allocation import Allocation, round_parts
from dispatcher.core.topology import Member, Topology
from dispatcher.tick.count import Snapshot
from dispatcher.tick.ports import StartThreads
from dispatcher.tick.report import StopReason, TickReport
from dispatcher.tick.round import MemberResult, MemberRound, Round
from dispatcher.tick.warm import WarmState

MemberRounds = Callable[[StartThreads, Snapshot], MemberRound]
"""Makes a member's side of a tick's rounds, on the tick's start threads, with its read of the state table."""

HALTING_STOPS = frozenset({StopReason.THROTTLED, StopReason.TIME})
"""Stops that end admission in every pool: AWS's quotas and the invocation's time are shared."""
STOP_PRECEDENCE = (
    StopReason.THROTTLED,
    StopReason.TIME,
    StopReason.CAPACITY,
    StopReason.WAITING,
    StopReason.DRAINED,
)
"""The tick's stop, of its pools' stops: the first in this order."""


def _next_passes(
    topology: Topology,
    allocations: Mapping[str, Allocation],
    stops: dict[str, StopReason],
    waiting: Mapping[str, bool],
    capacity: Mapping[str, bool],
) -> tuple[dict[str, int], dict[str, str]]:
    """Every pool's next pass together (each member's share, and its pool); a pool with none stops."""
    shares: dict[str, int] = {}
    pool_of: dict[str, str] = {}
    for pool, allocation in allocations.items():
        passing = {} if pool in stops else allocation.next_pass()
        if pool not in stops and not passing:
            stops[pool] = _pool_stop(topology, allocation, waiting=waiting[pool], capacity=capacity[pool])
        shares.update(passing)
        pool_of.update(dict.fromkeys(passing, pool))
    return shares, pool_of


class Passes:
    """Spends the free slots of a tick's pools, on its members' rounds (of every kind)."""

    def __init__(self, members: Mapping[str, MemberRounds], warm: WarmState) -> None:
        """``members``: each member's name (names are unique over every kind) → its rounds."""
        self._members = members
        self._warm = warm
        self.member_stops: dict[str, StopReason | None] = {}
        """Each member's stop in the latest tick, of those offered slots (None: it started all offered)."""
        self.member_rounds: dict[str, MemberRound] = {}
        """Each member's side of the latest tick's rounds, of those offered slots."""

    def spend(  # noqa: PLR0913, PLR0917 — each is one part of the tick its passes spend
        self,
        topology: Topology,
        allocations: Mapping[str, Allocation],
        rounds: Round,
        threads: StartThreads,
        report: TickReport,
        snapshot: Snapshot,
    ) -> StopReason:
        """Spend every pool's free slots, pass after pass (`Allocation`); why the tick stopped.

        ``snapshot``: the tick's read of the state table, handed to each member's rounds.

        The members of a pass, of every pool, share its rounds (`Round`): a tick over twenty
        members takes about as long as over one. A stop on AWS's quotas or the invocation's
        time stops them all.
        """
        self.member_stops = {}
        self._warm.turns += 1
        stops: dict[str, StopReason] = {}
        waiting = dict.fromkeys(allocations, False)
        capacity = dict.fromkeys(allocations, False)
        member_rounds: dict[str, MemberRound] = {}
        self.member_rounds = member_rounds
        while True:
            shares, pool_of = _next_passes(topology, allocations, stops, waiting, capacity)
            if not shares:
                return min(stops.values(), key=STOP_PRECEDENCE.index)
            for member in shares:
                if member not in member_rounds:
                    member_rounds[member] = self._members[member](threads, snapshot)
            admitted = self._admit(shares, member_rounds, rounds, report, self._warm.turns)
            halted = self._took(shares, pool_of, admitted, allocations, (waiting, capacity))
            if halted is not None:
                return min([*stops.values(), halted], key=STOP_PRECEDENCE.index)

    def _took(
        self,
        shares: Mapping[str, int],
        pool_of: Mapping[str, str],
        admitted: Mapping[str, tuple[int, StopReason | None]],
        allocations: Mapping[str, Allocation],
        seen: tuple[dict[str, bool], dict[str, bool]],
    ) -> StopReason | None:
        """Book a pass's starts in each pool's allocation; a stop that halts every pool, if one came.

        ``seen``: what the members' stops showed of each pool (one waited; one found its capacity).
        """
        waiting, capacity = seen
        halted: StopReason | None = None
        for member, offered in shares.items():
            pool = pool_of[member]
            started, stop = admitted[member]
            self.member_stops[member] = stop
            allocations[pool].took(member, offered, started, spent=stop is not None)
            if stop in HALTING_STOPS:
                halted = halted or stop
            waiting[pool] = waiting[pool] or stop is StopReason.WAITING
            capacity[pool] = capacity[pool] or stop is StopReason.CAPACITY
        return halted

    @staticmethod
    def _admit(
        shares: Mapping[str, int],
        member_rounds: Mapping[str, MemberRound],
        rounds: Round,
        report: TickReport,
        turn: int,
    ) -> dict[str, tuple[int, StopReason | None]]:
        """Rounds over a pass's members until each started its share or stopped: how many, and why.

        A member that stopped leaves the rounds; one that stopped on AWS's quotas or the
        invocation's time stops the others too.
        """
        left = dict(shares)
        started = dict.fromkeys(shares, 0)
        stops: dict[str, StopReason] = {}
        while left:
            # A round holds at most one round's starts, shared by its members in receive batches:
            # its starts are paced as one reservation and sent in one wave after the first.
            parts = round_parts(left, turn)
            offers = {member: (member_rounds[member], part) for member, part in parts.items()}
            results = rounds.run(offers, left)
            halted = _took_round(results, report, (started, left), stops)
            left = {
                member: offered for member, offered in left.items() if member not in stops and offered > 0
            }
            if halted is not None:
                stops.update(dict.fromkeys(left, halted))
                break
        return {member: (started[member], stops.get(member)) for member in shares}


def _took_round(
    results: Mapping[str, MemberResult],
    report: TickReport,
    tallies: tuple[dict[str, int], dict[str, int]],
    stops: dict[str, StopReason],
) -> StopReason | None:
    """Count a round's results: each member's starts (``tallies``: started, left), stops; a halting one."""
    started, left = tallies
    halted: StopReason | None = None
    for member, (counts, stop, slots) in results.items():
        report.count_round(member, counts)
        started[member] += slots
        left[member] -= slots
        if stop is not None:
            stops[member] = stop
        if stop in HALTING_STOPS:
            halted = halted or stop
    return halted


def _pool_stop(topology: Topology, allocation: Allocation, *, waiting: bool, capacity: bool) -> StopReason:
    """Why a pool's members stopped once its passes are over."""
    # A member neither spent nor paused has jobs that wait for a slot (its pool's or its own MAX's).
    paused = {member.name for member in topology.members_of(kind=Member) if member.paused}
    if capacity or any(claim.member not in allocation.spent | paused for claim in allocation.claims):
        return StopReason.CAPACITY
    return StopReason.WAITING if waiting else StopReason.DRAINED
