"""The in-memory AWS: a FIFO job queue, its DLQ, a STANDARD state machine over a `World`, the state table.

With `SimLane`s it holds more: each lane's queue, and its own state machine (with its
records in the state table) unless it shares another lane's; `InMemoryAws.lanes_document`
is the ``LANES`` that deploys them. Every lane's dead letters go to one box.

`InMemoryAws.ports` gives the tick service its ports on one container's clients, so the
same `Dispatcher` that runs over boto3 in the Lambda runs here, in virtual time. The world
ends each execution when its input's ``seconds`` are over and plans its status change
event (lost, doubled or late as the `EventPlan` says); every subscriber (the refill rule)
gets each one when it is delivered.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dispatcher.adapters.clients import ATTEMPTS, START_ATTEMPTS
from dispatcher.core.control import Control
from dispatcher.core.lane_rosters import KeptRoster
from dispatcher.core.quotas import SQS_FIFO_HIGH_THROUGHPUT_CALLS_PER_ACTION
from dispatcher.core.topology import DEFAULT, Lane, Pool, Topology
from dispatcher.tick.ports import Ports
from dispatcher.tick.wiring import wire
from tests.support.gate_world import Gates, GateSpec
from tests.support.plans import EventPlan, FaultPlan, Lag
from tests.support.runs import Delivery, Execution
from tests.support.sim.api import LATENCY_SECONDS, Client, Usage
from tests.support.sim.dynamodb import LedgerView, StateTable
from tests.support.sim.faults import Faults, Process
from tests.support.sim.inside import LaneRosterView, RosterView
from tests.support.sim.jobs import JobPartitions, JobRecordsView
from tests.support.sim.lease import LeaseView
from tests.support.sim.rate import RateItems, RateView
from tests.support.sim.scheduler import Scheduler
from tests.support.sim.sqs import DeadLetterBox, DeadLettersView, FifoQueue, JobQueueView
from tests.support.sim.stepfunctions import ExecutionsView, StepFunctions, TaskTokensView
from tests.support.world import World

START = 1_800_000_000.0
REGION = "us-east-1"
ACCOUNT = "123456789012"
DEAD_LETTER_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/dead-letters.fifo"


def state_machine_arn(region: str, name: str = "jobs") -> str:
    """A simulated state machine (``jobs``: the default lane's)."""
    return f"arn:aws:states:{region}:{ACCOUNT}:stateMachine:{name}"


@dataclass(frozen=True)
class SimLane:
    """A lane besides ``default``: its own queue, and its own state machine unless it ``shares`` one."""

    name: str
    pool: str = DEFAULT
    priority: int = 0
    max_concurrency: int | None = None
    starts_per_second: float | None = None
    shares: str | None = None
    """Another lane (``default`` too) whose state machine this one starts."""


@dataclass(frozen=True)
class SimGate:
    """A gate: its request queue (FIFO, high throughput) and a gated state machine of its own."""

    name: str
    pool: str = DEFAULT
    max_concurrency: int | None = None


@dataclass(frozen=True)
class Clients:
    """One container's clients, as the function builds them (the start client has one more attempt)."""

    stepfunctions: Client
    starts: Client
    sqs: Client
    dynamodb: Client
    ssm: Client
    process: Process
    """The container's process, which all its clients share (a crash kills them all)."""


class SimResources:
    """The in-memory AWS's views on one container's clients (`dispatcher.tick.wiring.Resources`)."""

    def __init__(
        self, aws: InMemoryAws, clients: Clients, wait_seconds: int, kept: dict[str, KeptRoster] | None = None
    ) -> None:
        """``kept``: the container's tenant lanes' rosters as it keeps them (its warm state's)."""
        self._aws = aws
        self._clients = clients
        self._wait_seconds = wait_seconds
        self._kept = kept

    def queue(self, url: str) -> JobQueueView:
        """A lane's job queue."""
        aws = self._aws
        assert url in aws.queues, f"no simulated queue {url}"
        return JobQueueView(aws.queues[url], self._clients.sqs, aws.scheduler, self._wait_seconds, aws.faults)

    def dead_letters(self, url: str) -> DeadLettersView:
        """The dead-letter queue (there is one, whatever its URL)."""
        return DeadLettersView(self._aws.dead_letters, self._clients.sqs)

    def state_machine(self, arn: str) -> ExecutionsView:
        """A state machine (a lane's, or a gate's)."""
        known = {*self._aws.lane_machines.values(), *self._aws.gate_machines.values()}
        assert arn in known, f"no simulated state machine {arn}"
        clients = self._clients
        return ExecutionsView(self._aws.stepfunctions, arn, clients.stepfunctions, clients.starts)

    def ledger(self, key: str) -> LedgerView:
        """Every lane's starts and ends."""
        assert key == self._aws.state_machine_arn, f"no records under {key}"
        return LedgerView(self._aws.table, self._clients.dynamodb, self._aws.jobs)

    def lane_roster(self, key: str) -> LaneRosterView:
        """The tenant lanes' rosters, kept warm in the container's memory."""
        assert key == self._aws.state_machine_arn, f"no rosters under {key}"
        table = self._aws.table
        return LaneRosterView(table.own, table.inside_partition, self._clients.dynamodb, self._kept)

    def gate_roster(self, key: str) -> RosterView:
        """The gates' rosters."""
        assert key == self._aws.state_machine_arn, f"no rosters under {key}"
        table = self._aws.table
        return RosterView(table.own, table.inside_partition, self._clients.dynamodb)

    def lease(self, key: str) -> LeaseView:
        """The tick lease."""
        assert key == self._aws.state_machine_arn, f"no lease under {key}"
        return LeaseView(self._aws.table.lease, self._clients.dynamodb)

    def start_rate(self, lane: str, starts_per_second: float) -> RateView:
        """A lane's start-rate bucket."""
        return RateView(self._aws.rates, self._clients.dynamodb, lane, starts_per_second)

    def task_tokens(self) -> TaskTokensView:
        """`SendTaskSuccess`, through the start client (as the function's)."""
        return TaskTokensView(self._aws.stepfunctions, self._clients.starts)

    def job_records(self, key: str) -> JobRecordsView:
        """The pending cancellations and job records."""
        assert key == self._aws.state_machine_arn, f"no job records under {key}"
        return JobRecordsView(self._aws.jobs, self._clients.dynamodb)


class InMemoryAws:
    """AWS in memory, in virtual time, with AWS's quotas for one region and a latency per call."""

    def __init__(  # noqa: PLR0913 — each is one part of the emulated account
        self,
        *,
        region: str = REGION,
        lag: Lag | None = None,
        events: EventPlan | None = None,
        latency: float = LATENCY_SECONDS,
        seed: int = 0,
        lanes: Sequence[SimLane] = (),
        pools: Mapping[str, int] | None = None,
        gates: Sequence[SimGate] = (),
    ) -> None:
        """``lanes``: besides ``default``; ``pools``: each pool's MAX but ``default``'s (the settings')."""
        self.region = region
        self.latency = latency
        self.scheduler = Scheduler(START)
        self.scheduler.attach()
        self.usage = Usage()
        self.world = World(
            seed=seed,
            start=START,
            faults=FaultPlan(lag=lag or Lag(), enabled=False),
            events=events or EventPlan(),
            clock=lambda: self.scheduler.now,
        )
        self.world.on_delivery = self._deliver_at
        self.state_machine_arn = state_machine_arn(region)
        self.stepfunctions = StepFunctions(self.scheduler, self.world, region, on_run=self._end_on_time)
        self.queue = FifoQueue(self.scheduler, f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/jobs.fifo")
        self.dead_letters = DeadLetterBox(self.scheduler)
        self.table = StateTable(self.scheduler, self.usage, self.state_machine_arn)
        self.jobs = JobPartitions(self.scheduler, self.usage, self.table)
        """Pending cancellations and job records (the producers' cancellations are written here)."""
        self.lanes = tuple(lanes)
        self.pools = dict(pools or {})
        self.queues = {self.queue.url: self.queue}
        self.lane_queues = {DEFAULT: self.queue}
        """Lane → its job queue."""
        self.lane_machines = {DEFAULT: self.state_machine_arn}
        """Lane → the ARN of the state machine it starts."""
        for lane in self.lanes:
            queue = FifoQueue(
                self.scheduler, f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{lane.name}.fifo"
            )
            self.queues[queue.url] = self.lane_queues[lane.name] = queue
            arn = self.lane_machines[lane.shares] if lane.shares else state_machine_arn(region, lane.name)
            self.lane_machines[lane.name] = arn
        self.gates = tuple(gates)
        self.gate_queues: dict[str, FifoQueue] = {}
        """Gate → its request queue."""
        self.gate_machines: dict[str, str] = {}
        """Gate → its gated state machine."""
        if self.gates:
            self.world.gates = Gates(self.world)
        for gate in self.gates:
            url = f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{gate.name}.fifo"
            queue = FifoQueue(self.scheduler, url, SQS_FIFO_HIGH_THROUGHPUT_CALLS_PER_ACTION)
            self.queues[url] = self.gate_queues[gate.name] = queue
            self.gate_machines[gate.name] = state_machine_arn(region, f"{gate.name}-gated")
            assert self.world.gates is not None
            self.world.gates.specs[gate.name] = GateSpec(gate.pool, gate.max_concurrency)
            self.world.gates.machines.add(self.gate_machines[gate.name])
        self.rates = RateItems(self.usage)
        """The state table's start-rate items, every lane's."""
        self.control: Control | None = None
        """The control parameter's value (None: it doesn't exist), as `GetParameter` reads it."""
        self.subscribers: list[Callable[[dict[str, Any]], None]] = []
        """Each delivered status change event goes to each of these (the refill rule's target)."""
        self._rng = random.Random(f"{seed}:retries")
        self.faults = Faults(random.Random(f"{seed}:faults"))
        """Faults injected into the dispatcher's calls (none unless a test plans some)."""

    def clients(self, process: Process | None = None) -> Clients:
        """A container's clients, each with botocore's attempts and its own retry quota, and one process."""
        process = process or Process()

        def client(service: str, attempts: int = ATTEMPTS) -> Client:
            return Client(
                self.scheduler,
                self.usage,
                self._rng,
                service=service,
                max_attempts=attempts,
                latency=self.latency,
                process=process,
                faults=self.faults,
            )

        return Clients(
            stepfunctions=client("states"),
            starts=client("states", START_ATTEMPTS),
            sqs=client("sqs"),
            dynamodb=client("dynamodb"),
            ssm=client("ssm"),
            process=process,
        )

    def ports(self, clients: Clients, *, wait_seconds: int = 0) -> Ports:
        """The tick's ports on one container's clients, wired as the function wires them."""
        return wire(self.topology, self.resources(clients, wait_seconds=wait_seconds))

    def resources(
        self, clients: Clients, *, wait_seconds: int = 0, kept: dict[str, KeptRoster] | None = None
    ) -> SimResources:
        """What the function makes its ports from, on one container's clients (``kept``: its warm rosters)."""
        return SimResources(self, clients, wait_seconds, kept)

    @property
    def topology(self) -> Topology:
        """One lane and one pool: the default queue and state machine (`lanes_document` has the others)."""
        lane = Lane(DEFAULT, DEFAULT, self.queue.url, DEAD_LETTER_QUEUE_URL, self.state_machine_arn)
        return Topology(pools=(Pool(DEFAULT, 0),), members=(lane,))

    def lanes_document(self) -> str | None:
        """The ``LANES`` setting that deploys the lanes and gates (None: only ``default``)."""
        if not self.lanes and not self.gates:
            return None
        lanes = []
        for lane in self.lanes:
            entry: dict[str, Any] = {
                "name": lane.name,
                "queue_url": self.lane_queues[lane.name].url,
                "dead_letter_queue_url": DEAD_LETTER_QUEUE_URL,
                "state_machine_arn": self.lane_machines[lane.name],
                "pool": lane.pool,
                "priority": lane.priority,
            }
            if lane.max_concurrency is not None:
                entry["max_concurrency"] = lane.max_concurrency
            if lane.starts_per_second is not None:
                entry["starts_per_second"] = lane.starts_per_second
            lanes.append(entry)
        pools = {name: {"max_concurrency": cap} for name, cap in self.pools.items()}
        gates = [
            {
                "name": gate.name,
                "queue_url": self.gate_queues[gate.name].url,
                "dead_letter_queue_url": DEAD_LETTER_QUEUE_URL,
                "state_machine_arn": self.gate_machines[gate.name],
                "pool": gate.pool,
                **({} if gate.max_concurrency is None else {"max_concurrency": gate.max_concurrency}),
            }
            for gate in self.gates
        ]
        return json.dumps({"pools": pools, "lanes": lanes, "gates": gates})

    def cap_pools(self, default_max: int) -> None:
        """Have the world check each pool's cap at every start (``default_max``: pool ``default``'s MAX)."""
        caps = {DEFAULT: default_max, **self.pools}
        machines: dict[str, set[str]] = {pool: set() for pool in caps}
        machines[DEFAULT].add(self.state_machine_arn)
        for lane in self.lanes:
            machines[lane.pool].add(self.lane_machines[lane.name])
        gated = {gate.pool for gate in self.gates}
        self.world.pool_caps = {
            pool: (frozenset(arns), caps[pool]) for pool, arns in machines.items() if arns or pool in gated
        }

    def started(self) -> list[Execution]:
        """Executions the dispatcher started, in start order."""
        return sorted(
            (execution for execution in self.world.executions.values() if execution.by_dispatcher),
            key=lambda execution: execution.sequence,
        )

    def _end_on_time(self, execution: Execution) -> None:
        self.scheduler.call_at(execution.runs[-1].planned_end, self._end_due)

    def _end_due(self) -> None:
        self.world.advance(0.0, lambda execution: None)

    def _deliver_at(self, delivery: Delivery) -> None:
        self.scheduler.call_at(delivery.at, self._deliver_due)

    def _deliver_due(self) -> None:
        for event in self.world.due_events():
            for subscriber in self.subscribers:
                subscriber(event)
