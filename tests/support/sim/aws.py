"""The in-memory AWS: a FIFO job queue, its DLQ, a STANDARD state machine over a `World`, the state table.

`InMemoryAws.ports` gives the tick service its ports on one container's clients, so the
same `Dispatcher` that runs over boto3 in the Lambda runs here, in virtual time. The world
ends each execution when its input's ``seconds`` are over and plans its status change
event (lost, doubled or late as the `EventPlan` says); every subscriber (the refill rule)
gets each one when it is delivered.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dispatcher.adapters.clients import ATTEMPTS, START_ATTEMPTS
from dispatcher.core.control import Control
from dispatcher.core.lanes import DEFAULT, Lane, PoolLimit, Topology
from dispatcher.tick.ports import Ports, wire
from tests.support.sim.api import LATENCY_SECONDS, Client, Usage
from tests.support.sim.dynamodb import LeaseView, StateStoreView, StateTable
from tests.support.sim.faults import Faults, Process
from tests.support.sim.scheduler import Scheduler
from tests.support.sim.sqs import DeadLetterBox, DeadLettersView, FifoQueue, JobQueueView
from tests.support.sim.stepfunctions import ExecutionsView, StepFunctions
from tests.support.world import Delivery, EventPlan, Execution, FaultPlan, Lag, World

START = 1_800_000_000.0
REGION = "us-east-1"
ACCOUNT = "123456789012"
DEAD_LETTER_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/dead-letters.fifo"


def state_machine_arn(region: str) -> str:
    """The simulated state machine."""
    return f"arn:aws:states:{region}:{ACCOUNT}:stateMachine:jobs"


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
    """The in-memory AWS's views on one container's clients (`dispatcher.tick.ports.Resources`)."""

    def __init__(self, aws: InMemoryAws, clients: Clients, wait_seconds: int) -> None:
        self._aws = aws
        self._clients = clients
        self._wait_seconds = wait_seconds

    def queue(self, url: str) -> JobQueueView:
        """The job queue."""
        assert url == self._aws.queue.url, f"no simulated queue {url}"
        aws = self._aws
        return JobQueueView(aws.queue, self._clients.sqs, aws.scheduler, self._wait_seconds, aws.faults)

    def dead_letters(self, url: str) -> DeadLettersView:
        """The dead-letter queue (there is one, whatever its URL)."""
        return DeadLettersView(self._aws.dead_letters, self._clients.sqs)

    def state_machine(self, arn: str) -> ExecutionsView:
        """The state machine."""
        assert arn == self._aws.state_machine_arn, f"no simulated state machine {arn}"
        clients = self._clients
        return ExecutionsView(self._aws.stepfunctions, arn, clients.stepfunctions, clients.starts)

    def state_table(self, state_machine_arn: str) -> StateStoreView:
        """The state machine's records."""
        assert state_machine_arn == self._aws.state_machine_arn, f"no records of {state_machine_arn}"
        return StateStoreView(self._aws.table, self._clients.dynamodb)

    def lease(self, key: str) -> LeaseView:
        """The tick lease."""
        assert key == self._aws.state_machine_arn, f"no lease under {key}"
        return LeaseView(self._aws.table.lease, self._clients.dynamodb)

    def start_rate(self, lane: str, starts_per_second: float) -> Any:
        """No simulated lane is rate-capped (yet)."""
        raise AssertionError(f"no simulated start rate for lane {lane}")


class InMemoryAws:
    """AWS in memory, in virtual time, with AWS's quotas for one region and a latency per call."""

    def __init__(
        self,
        *,
        region: str = REGION,
        lag: Lag | None = None,
        events: EventPlan | None = None,
        latency: float = LATENCY_SECONDS,
        seed: int = 0,
    ) -> None:
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

    def resources(self, clients: Clients, *, wait_seconds: int = 0) -> SimResources:
        """What the function makes its ports from, on one container's clients."""
        return SimResources(self, clients, wait_seconds)

    @property
    def topology(self) -> Topology:
        """One lane and one pool: the simulated queue and state machine."""
        lane = Lane(DEFAULT, DEFAULT, self.queue.url, DEAD_LETTER_QUEUE_URL, self.state_machine_arn)
        return Topology(pools=(PoolLimit(DEFAULT, 0),), lanes=(lane,))

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
