"""The boto3 adapters of one container, made from names (`dispatcher.tick.wiring.Resources`)."""

from __future__ import annotations

from dispatcher.adapters.clients import Clients
from dispatcher.adapters.gate_roster import RosterTable
from dispatcher.adapters.jobs import JobTable
from dispatcher.adapters.lane_roster import LaneRosterTable
from dispatcher.adapters.lease import TickLease
from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.adapters.rate import RateBucket
from dispatcher.adapters.sqs import DeadLetterQueue, SourceQueue
from dispatcher.adapters.stepfunctions import StateMachine, TaskTokens
from dispatcher.core.lane_rosters import KeptRoster


class AwsResources:
    """Adapters on one container's clients, over one state table."""

    def __init__(
        self, clients: Clients, table: str, *, wait_seconds: int, kept: dict[str, KeptRoster] | None = None
    ) -> None:
        """``kept``: the tenant lanes' rosters as this container keeps them (`LaneRosterTable`)."""
        self._clients = clients
        self._table = table
        self._wait_seconds = wait_seconds
        self._kept = kept

    def queue(self, url: str) -> SourceQueue:
        """A job queue; each receive long-polls ``wait_seconds``."""
        return SourceQueue(self._clients.sqs, url, wait_seconds=self._wait_seconds)

    def dead_letters(self, url: str) -> DeadLetterQueue:
        """A dead-letter queue."""
        return DeadLetterQueue(self._clients.sqs, url)

    def state_machine(self, arn: str) -> StateMachine:
        """A state machine; its starts go through the start client (one more attempt)."""
        return StateMachine(self._clients.stepfunctions, arn, start_client=self._clients.starts)

    def ledger(self, state_machine_arn: str) -> StartLedgerTable:
        """The state table's start ledger, keyed by one state machine."""
        return StartLedgerTable(self._clients.dynamodb, self._table, state_machine_arn)

    def lane_roster(self, state_machine_arn: str) -> LaneRosterTable:
        """The tenant lanes' rosters in the state table, keyed by one state machine, kept warm."""
        return LaneRosterTable(self._clients.dynamodb, self._table, state_machine_arn, self._kept)

    def gate_roster(self, state_machine_arn: str) -> RosterTable:
        """The gates' rosters in the state table, keyed by one state machine."""
        return RosterTable(self._clients.dynamodb, self._table, state_machine_arn)

    def lease(self, key: str) -> TickLease:
        """The tick lease under ``key``."""
        return TickLease(self._clients.dynamodb, self._table, key)

    def start_rate(self, lane: str, starts_per_second: float) -> RateBucket:
        """A lane's start-rate bucket in the state table."""
        return RateBucket(self._clients.dynamodb, self._table, lane, starts_per_second)

    def task_tokens(self) -> TaskTokens:
        """`SendTaskSuccess`, through the start client (admissions are made at the rate starts are)."""
        return TaskTokens(self._clients.starts)

    def job_records(self, state_machine_arn: str) -> JobTable:
        """The state table's pending cancellations and job records, keyed by one state machine."""
        return JobTable(self._clients.dynamodb, self._table, state_machine_arn)
