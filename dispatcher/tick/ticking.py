"""A tick's phases: count each pool's members, adapt its limit, plan, spend its free slots, report.

Count (`Counted`: one read of the state table, each count key's count), adapt (each adaptive
pool's L), plan (pure: `plan_tick`), spend (passes of rounds over the members), report
(pure: `counted_report`). The `Dispatcher` holds the lease and loops; this holds the phases.
"""

from __future__ import annotations

from collections.abc import Sequence

from dispatcher.core.allocation import Allocation
from dispatcher.core.counting import pool_running
from dispatcher.core.errors import TransientError
from dispatcher.core.events import EndedExecution, Release
from dispatcher.core.pacing import start_threads
from dispatcher.core.planning import TickPlan, plan_tick
from dispatcher.core.topology import Lane, Pool, Topology
from dispatcher.telemetry import logger
from dispatcher.tick.count import Records, known_ends, oldest_needed
from dispatcher.tick.counted import Counted
from dispatcher.tick.groups import Tenants, books_total
from dispatcher.tick.kind import TickParts
from dispatcher.tick.kinds import TICK_KINDS
from dispatcher.tick.limits import Limits
from dispatcher.tick.passes import HALTING_STOPS, Passes
from dispatcher.tick.policy import TickPolicy
from dispatcher.tick.ports import Ports, Runtime
from dispatcher.tick.rates import RateWaits
from dispatcher.tick.report import (
    StopReason,
    TenantFigures,
    TickReport,
    counted_report,
    stopped_report,
)
from dispatcher.tick.reservations import ReservationKeeper, reserve_of, valid
from dispatcher.tick.round import Round
from dispatcher.tick.sizes import SizeKeeper, stale_sizes
from dispatcher.tick.warm import WarmState

LANE_THREADS = 32
"""Lanes whose calls of one round are made at once (a receive, a dead-lettering, a settle each)."""


class Ticker:
    """One container's ticks, phase after phase: count, adapt, plan, spend, report.

    Each phase is handed what the one before made (`Counted`, the steered pools, the
    `TickPlan`): the counters, the limits, the rates and the members' rounds are its own;
    the lease and the invocation's loop are the `Dispatcher`'s.
    """

    def __init__(
        self,
        policy: TickPolicy,
        ports: Ports,
        runtime: Runtime,
        warm: WarmState,
        records: Records,
    ) -> None:
        """The ticks of one invocation: ``records`` are the state table's, read once a tick."""
        self._policy = policy
        self._ports = ports
        self._runtime = runtime
        self._warm = warm
        self.topology = policy.topology
        """Every pool and member with their live limits, as the latest tick steered them."""
        self._rates = RateWaits({lane.name: lane.rate for lane in ports.lanes if lane.rate is not None})
        self._records = records
        self._limits = Limits(ports.limits, runtime.clock)
        self._tenants = Tenants()
        parts = TickParts(policy, runtime, warm, records, self._tenants.books)
        self._kinds = [kind.tick(ports, parts, self.topology) for kind in TICK_KINDS]
        """Each kind's side of the ticks (its counters, groups and rounds), in `TICK_KINDS`' order."""
        self._passes = Passes(
            {name: rounds for kind in self._kinds for name, rounds in kind.rounds().items()}, warm
        )

    def left(self, releases: Sequence[Release]) -> None:
        """Free the places of executions that say they left a member, whether or not anything may start."""
        for kind in self._kinds:
            kind.left(releases)

    @property
    def active_pools(self) -> list[Pool]:
        """Pools where something may start: not paused, MAX above 0, a lane or gate not paused."""
        return [
            pool
            for pool in self.topology.pools
            if not pool.halted and any(not member.paused for member in self.topology.members_of(pool.name))
        ]

    def steered(self, topology: Topology) -> None:
        """Tick from now on within ``topology``'s live limits (the operator changed them, or not)."""
        self.topology = topology
        for kind in self._kinds:
            kind.steered(topology)

    def ends_by_machine(self, ended: Sequence[EndedExecution]) -> dict[str, list[EndedExecution]]:
        """The ends each counter is told about (an end that names no state machine is the default lane's)."""
        default = self.topology.default_lane.state_machine_arn
        watched = frozenset().union(*(kind.machines for kind in self._kinds))
        by_machine: dict[str, list[EndedExecution]] = {}
        for end in ended:
            arn = end.state_machine_arn or default
            if arn in watched:
                by_machine.setdefault(arn, []).append(end.model_copy(update={"state_machine_arn": arn}))
        return by_machine

    def rate_due(self) -> float | None:
        """Seconds until a lane that waits for its rate has its next token, if there is time to tick then."""
        due = self._rates.due(self._runtime.clock())
        if due is None or self._runtime.remaining_seconds() - due <= self._policy.time_margin_seconds:
            return None
        return due

    def _count(self, pools: Sequence[Pool], ended: Sequence[EndedExecution]) -> Counted:
        """Every active pool's members counted from one read of the records, and their groups read."""
        counters = [counter for kind in self._kinds for counter in kind.counters(pools)]
        for counter in counters:
            counter.ensure_standard()
        now = self._runtime.clock()
        snapshot = self._records.read(now, oldest_needed(counters, now))
        by_machine = self.ends_by_machine(ended)
        counts = {
            counter.count_key: counter.count(
                snapshot.windows[counter.state_machine_arn], by_machine.get(counter.state_machine_arn, ())
            )
            for counter in counters
        }
        counted = frozenset(pool.name for pool in pools)
        self._tenants.read(
            book for kind in self._kinds for book in kind.books(counted, snapshot, by_machine, counts)
        )
        return Counted(counts, known_ends(snapshot, by_machine, counts), snapshot)

    def _tokens(self, pools: Sequence[Pool]) -> dict[str, int | None]:
        """Each lane's start-rate tokens now (None: no rate, or paused), pool after pool."""
        tokens: dict[str, int | None] = {}
        for pool in pools:
            now = self._runtime.clock()
            for lane in self.topology.members_of(pool.name, Lane):
                tokens[lane.name] = None if lane.paused else self._rates.tokens(lane.name, now)
        return tokens

    def _report(self, plan: TickPlan, counted: Counted) -> TickReport:
        """The tick's report as it begins spending: what it counted, every member's counts at 0."""
        for pool in plan.pools:
            logger.info(
                "capacity",
                extra={
                    "pool": pool.pool.name,
                    "running": pool.running,
                    "free": pool.free,
                    "max": pool.pool.max_concurrency,
                    **({} if pool.pool.adaptive is None else {"limit": pool.pool.ceiling}),
                },
            )
        return counted_report(self.topology, plan, counted.counts)

    def _spend(self, plan: TickPlan, counted: Counted, report: TickReport) -> StopReason:
        """Spend every pool's free slots in rounds (then look for pending admissions); why admission ended."""
        read = counted.snapshot.reservations
        allocations = {
            pool.pool.name: Allocation(
                pool.free,
                pool.claims,
                reserved=reserve_of(pool, valid(self.topology, pool.pool.name, read.get(pool.pool.name))),
            )
            for pool in plan.pools
        }
        lanes = min(len(self.topology.members), LANE_THREADS)
        with (
            self._runtime.pool(self._start_threads()) as threads,
            self._runtime.pool(lanes) as lane_threads,
        ):
            rounds = Round(
                threads,
                lane_threads,
                self._runtime,
                self._warm,
                (self._ports.ledger, {member.name: member.roster for member in self._ports.members}),
                time_margin_seconds=self._policy.time_margin_seconds,
                jobs=self._ports.jobs,
                cancellations=counted.snapshot.cancellations,
                sizes=self._size_keeper(counted),
            )
            stopped = self._passes.spend(
                self.topology, allocations, rounds, threads, report, counted.snapshot
            )
            if stopped not in HALTING_STOPS:
                for kind in self._kinds:
                    kind.after_spend(rounds, threads, report, self._passes.member_stops)
        tick_lanes = {
            name: (member.reserved_admitted, member.short)
            for name, member in self._passes.member_rounds.items()
        }
        ReservationKeeper(self._ports.sizes, self.topology).settle(
            read, allocations, tick_lanes, self._runtime.clock()
        )
        for pool, allocation in allocations.items():
            if allocation.held and pool in report.pools:
                report.pools[pool].reserved = allocation.held
        return stopped

    def _size_keeper(self, counted: Counted) -> SizeKeeper:
        """What keeps the tick's sized starts, with the ended entries it may drop."""
        stale = stale_sizes(self.topology, counted.snapshot.sizes, counted.counts, self._runtime.clock())
        pool_of = {member.name: member.pool for member in self.topology.members}
        return SizeKeeper(self._ports.sizes, pool_of, stale)

    def _start_threads(self) -> int:
        if self._policy.start_concurrency:
            return self._policy.start_concurrency
        pace = self._warm.paces_for(self.topology.default_lane.state_machine_arn).start
        return start_threads(pace.rate, self._warm.start_latency.seconds)

    def tick(self, pools: Sequence[Pool], ended: Sequence[EndedExecution] = ()) -> TickReport:
        """Count each active pool's RUNNING once, adapt, plan, then hand its free slots to its members."""
        try:
            counted = self._count(pools, ended)
        except TransientError as error:
            # Without a count nothing may start; the next tick tries again.
            logger.warning("could not count RUNNING executions", extra={"reason": str(error)})
            return stopped_report(self.topology, StopReason.THROTTLED)
        running = counted.running
        pools_running = {pool.name: pool_running(self.topology, pool.name, running) for pool in pools}
        pools = self._limits.adapt(self.topology, pools, counted.snapshot.limits, counted.ends, pools_running)
        plan = plan_tick(self.topology, pools, running, pools_running, self._tokens(pools))
        self._rates.planned(plan.bound, plan.starved)
        report = self._report(plan, counted)
        report.stopped = self._spend(plan, counted, report)
        self._rates.book(self._passes.member_stops)
        if self._tenants.books:
            held, at_limit, largest = books_total(self._tenants.books)
            report.tenants = TenantFigures(held=held, groups_at_limit=at_limit, largest_group_share=largest)
        return report
