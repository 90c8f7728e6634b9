"""DynamoDB: the tick lease, which serialises ticks across invocations and containers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dispatcher.adapters.errors import translated
from dispatcher.adapters.table import RECORD_LIFETIME_SECONDS, conditional, conditional_answer
from dispatcher.core.events import Ask

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

LEASE_SORT_KEY = "tick"
LEASE_POLL_SECONDS = 0.1
"""How often a wait for the tick in flight looks whether it has ended."""
LEASE_GRACE_SECONDS = 5.0
"""Beyond the keeper's own time (``held_until``), allowed for clocks that disagree."""


@dataclass(frozen=True)
class LeaseState:
    """The tick lease as one read found it."""

    owner: str
    held_until: float
    asked: bool
    """Another tick was asked of the keeper and it has not taken the ask yet."""


class TickLease:
    """The lease that serialises ticks: whoever holds it counts and spends the free slots.

    One item per state machine (``pk`` = ``lease#<ARN>``, ``sk`` = ``tick``), taken with
    a conditional ``PutItem`` and held until the keeper's invocation must have ended
    (``held_until``). A keeper that dies keeps the lease only until then. An invocation
    that finds the lease held sets ``again`` on it, and the keeper ticks once more
    before letting go, so what that invocation came to do (an execution ended) is done
    within seconds, not at the next scheduled tick.
    """

    def __init__(self, client: DynamoDBClient, table: str, state_machine_arn: str) -> None:
        self._client = client
        self.table = table
        self._key = {"pk": {"S": f"lease#{state_machine_arn}"}, "sk": {"S": LEASE_SORT_KEY}}

    def _call(self, operation: str, **request: Any) -> bool:
        """Make a conditional call; False when its condition failed."""
        return conditional(self._client, self.table, "tick lease", operation, **request)

    def acquire(self, owner: str, now: float, held_until: float) -> bool:
        """Take the lease if it is free or its keeper's time is up.

        Taking it again under the same ``owner`` succeeds: botocore's retry of a write
        that was applied but whose answer was lost must not find its own lease "held".
        """
        item = {
            **self._key,
            "owner": {"S": owner},
            "acquired_at": {"N": f"{now:.6f}"},
            "held_until": {"N": f"{held_until:.6f}"},
            "expires_at": {"N": str(int(held_until) + RECORD_LIFETIME_SECONDS)},
        }
        return self._call(
            "put_item",
            Item=item,
            ConditionExpression="attribute_not_exists(pk) OR held_until < :now OR #owner = :me",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={":now": {"N": f"{now:.6f}"}, ":me": {"S": owner}},
        )

    def peek(self) -> LeaseState | None:
        """Who holds the lease, until when, and whether another tick was asked of them (None: nobody)."""
        with translated(f"GetItem on state table {self.table}"):
            item = self._client.get_item(TableName=self.table, Key=self._key, ConsistentRead=True).get("Item")
        if item is None:
            return None
        return LeaseState(
            owner=item["owner"]["S"], held_until=float(item["held_until"]["N"]), asked="again" in item
        )

    def ask_again(self, owner: str, now: float, wake_until: float | None = None) -> bool:
        """Ask the live keeper for one more tick; False when no one else holds the lease now.

        ``wake_until``: the asker came for wakes, whose producers' jobs until then must be
        received; it joins the ask's list (``wakes``), so no ask's second is lost to another's.
        """
        update = "SET again = :yes"
        values: dict[str, Any] = {":yes": {"BOOL": True}}
        if wake_until is not None:
            update += ", wakes = list_append(if_not_exists(wakes, :none), :wake)"
            values |= {":none": {"L": []}, ":wake": {"L": [{"N": f"{wake_until:.6f}"}]}}
        return self._call(
            "update_item",
            Key=self._key,
            UpdateExpression=update,
            ConditionExpression="attribute_exists(pk) AND held_until >= :now AND #owner <> :me",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={**values, ":now": {"N": f"{now:.6f}"}, ":me": {"S": owner}},
        )

    def take_ask(self, owner: str) -> Ask | None:
        """Take a request for another tick, if one came (None: none did)."""
        return self._take(owner, "#owner = :me AND attribute_exists(again)")

    def let_go_unless_asked(self, owner: str) -> Ask | None:
        """Let go unless another tick was asked for (None: let go); the request, taken, when it was.

        A keeper that lost the lease (its time ran out) lets go of nothing.
        """
        if self._call(
            "delete_item",
            Key=self._key,
            ConditionExpression="#owner = :me AND attribute_not_exists(again)",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={":me": {"S": owner}},
        ):
            return None
        return self._take(owner, "#owner = :me")

    def _take(self, owner: str, condition: str) -> Ask | None:
        """Remove the ask and its wakes' seconds under ``condition``: the ask (None: the condition failed)."""
        answer = conditional_answer(
            self._client,
            self.table,
            "tick lease",
            "update_item",
            Key=self._key,
            UpdateExpression="REMOVE again, wakes",
            ConditionExpression=condition,
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={":me": {"S": owner}},
            ReturnValues="UPDATED_OLD",
        )
        if answer is None:
            return None
        wakes = answer.get("Attributes", {}).get("wakes", {}).get("L", [])
        return Ask(max((float(wake["N"]) for wake in wakes), default=None))

    def let_go(self, owner: str) -> None:
        """Let go whatever was asked for (no time for another tick); nothing if it's no longer ours."""
        self._call(
            "delete_item",
            Key=self._key,
            ConditionExpression="#owner = :me",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={":me": {"S": owner}},
        )

    def await_tick_in_flight(
        self,
        asker: str,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Return once the tick in flight now (if any) has ended: every later tick reads what was written.

        It asks the keeper for another tick, as an invocation that finds the lease held
        does, and waits until the keeper took that ask (it does so only between ticks), let
        go, or its time ran out (it died). ``asker``: what asks (``cancel``, ``pause``).
        """
        if not self.ask_again(f"{asker}-{uuid.uuid4().hex}", clock()):
            return  # no tick holds the lease: the next one reads what was written
        first = self.peek()
        if first is None:
            return
        while True:
            now = self.peek()
            if now is None or now.owner != first.owner or not now.asked:
                return
            if clock() > now.held_until + LEASE_GRACE_SECONDS:
                return  # its keeper died: its time is up
            sleep(LEASE_POLL_SECONDS)
