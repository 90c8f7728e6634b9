"""The tick lease in memory: its one item on a partition of its own, and the adapter's conditions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dispatcher.core.events import Ask
from dispatcher.core.quotas import DYNAMODB_PARTITION_WRITES
from tests.support.sim.api import Client, LiveBucket, Usage
from tests.support.sim.scheduler import Scheduler


@dataclass
class LeaseItem:
    """The lease as its one item holds it."""

    owner: str
    held_until: float
    again: bool = False
    wakes: list[float] = field(default_factory=list)


class Lease:
    """The tick lease's item, on a partition of its own (1 write unit a call, whatever the condition says)."""

    def __init__(self, scheduler: Scheduler, usage: Usage, partition_key: str) -> None:
        self._scheduler = scheduler
        self._usage = usage
        self.partition = partition_key
        self._writes = LiveBucket.of(DYNAMODB_PARTITION_WRITES, scheduler.now)
        self.item: LeaseItem | None = None

    def admit(self) -> bool:
        """One write unit of the lease's partition now."""
        if not self._writes.take(self._scheduler.now):
            return False
        self._usage.consume(self.partition, "WriteRequestUnits", 1)
        return True


class LeaseView:
    """The `Lease` port on one container's DynamoDB client: the adapter's conditions, in memory."""

    def __init__(self, lease: Lease, client: Client) -> None:
        self._lease = lease
        self._client = client

    def _call(self, operation: str, effect: Callable[[], bool], role: str | None = None) -> bool:
        action = f"{operation} on state table (tick lease)"
        return self._client.call(operation, action, self._lease.admit, effect, role=role)

    def acquire(self, owner: str, now: float, held_until: float) -> bool:
        """Conditional `PutItem`: free, expired, or already ours."""

        def put() -> bool:
            item = self._lease.item
            if item is not None and item.held_until >= now and item.owner != owner:
                return False
            self._lease.item = LeaseItem(owner, held_until)
            return True

        return self._call("PutItem", put, role="lease")

    def ask_again(self, owner: str, now: float, wake_until: float | None = None) -> bool:
        """Conditional `UpdateItem`: a live keeper other than us is asked for a tick (and wakes' second)."""

        def update() -> bool:
            item = self._lease.item
            if item is None or item.held_until < now or item.owner == owner:
                return False
            item.again = True
            if wake_until is not None:
                item.wakes.append(wake_until)
            return True

        return self._call("UpdateItem", update)

    def take_ask(self, owner: str) -> Ask | None:
        """Conditional `UpdateItem`: ours, and another tick was asked for; the request taken."""
        taken: list[Ask] = []

        def take() -> bool:
            item = self._lease.item
            if item is None or item.owner != owner or not item.again:
                return False
            taken.append(self._taken(item))
            return True

        return taken[0] if self._call("UpdateItem", take) else None

    def let_go_unless_asked(self, owner: str) -> Ask | None:
        """Conditional `DeleteItem` unless another tick was asked for; then `UpdateItem` takes the request."""
        taken: list[Ask] = []

        def delete() -> bool:
            item = self._lease.item
            if item is not None and item.owner == owner and not item.again:
                self._lease.item = None
                return True
            return False

        def take_request() -> bool:
            item = self._lease.item
            if item is None or item.owner != owner:
                return False
            taken.append(self._taken(item))
            return True

        if self._call("DeleteItem", delete) or not self._call("UpdateItem", take_request):
            return None
        return taken[0]

    @staticmethod
    def _taken(item: LeaseItem) -> Ask:
        """The ask on ``item``, removed (``REMOVE again, wakes``)."""
        ask = Ask(max(item.wakes, default=None))
        item.again, item.wakes = False, []
        return ask

    def let_go(self, owner: str) -> None:
        """Conditional `DeleteItem`: ours, whatever was asked."""

        def delete() -> bool:
            if self._lease.item is not None and self._lease.item.owner == owner:
                self._lease.item = None
                return True
            return False

        self._call("DeleteItem", delete)
