"""DynamoDB: a gate's roster — who is inside it until each leaves — and any member's held jobs.

A gate's admissions are items of their own in the gate's partition, one an execution, kept
until the execution leaves (a release, an end, a check); any invocation may release one.
How the items are laid out: `dispatcher.adapters.gate_items`. A tenant lane's roster is
packed and kept by its keeper: `dispatcher.adapters.lane_roster`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from dispatcher.adapters.errors import translated
from dispatcher.adapters.gate_items import confirmation_item, inside_item, inside_item_key, read_inside
from dispatcher.adapters.roster_calls import RosterCalls
from dispatcher.adapters.roster_items import inside_partition
from dispatcher.adapters.table import conditional
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.errors import TransientError
from dispatcher.core.gates import confirmed
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.rosters import RosterEntry, RosterRead
from dispatcher.core.tenants import Hold
from dispatcher.core.topology import Member

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef


class RosterTable(RosterCalls):
    """Every gate's roster of one dispatcher: an item an admission, and confirmations."""

    def enter(self, entries: Sequence[RosterEntry]) -> list[RosterEntry]:
        """Write entries before their executions start or are admitted, 25 a call; those left unprocessed.

        An unprocessed entry's call must not happen in this round. The first call still
        failing after botocore's retries raises; a later one leaves its entries unprocessed.
        """
        unprocessed: list[RosterEntry] = []
        for index, chunk in enumerate(chunks(entries, BATCH_WRITE_LIMIT)):
            try:
                left = self._batch(
                    [{"PutRequest": {"Item": inside_item(self._own, entry)}} for entry in chunk]
                )
            except TransientError:
                if index == 0:
                    raise
                unprocessed += chunk
                continue
            keys = {
                (request["PutRequest"]["Item"]["pk"]["S"], request["PutRequest"]["Item"]["sk"]["S"])
                for request in left
            }
            unprocessed += [entry for entry in chunk if _key(self._own, entry) in keys]
        return unprocessed

    def leave(self, entries: Sequence[RosterEntry]) -> int:
        """Delete the entries of executions that left (their places are free); how many were left.

        One left behind holds its place until a later tick finds it left again.
        """
        left = 0
        for chunk in chunks(entries, BATCH_WRITE_LIMIT):
            requests: list[WriteRequestTypeDef] = [
                {"DeleteRequest": {"Key": inside_item_key(self._own, entry)}} for entry in chunk
            ]
            try:
                left += len(self._batch(requests))
            except (TransientError, ClientError):
                left += len(chunk)
        return left

    def read(self, member: Member) -> RosterRead:
        """The member's entries not deleted yet (a gate's each marked confirmed or not), read consistently."""
        entries, confirmations, holds = read_inside(self._query(member.name), member)
        return RosterRead(*confirmed(entries, confirmations), held=tuple(holds))

    def hold(self, member: Member, holds: Sequence[Hold]) -> None:
        """Note held jobs in ``member``'s roster, 25 a `BatchWriteItem`; raises unless each is written."""
        self._hold(member, holds)

    def tidy(self, member: Member, keys: Sequence[str]) -> int:
        """Delete items of ``member``'s roster by key (stale confirmations, shown holds); how many left."""
        return self._tidy(member, keys)

    def confirm(self, gate: Gate, names: Sequence[str], now: float) -> None:
        """Note that `SendTaskSuccess` took these admissions (one item); raises when it can't be written."""
        with translated(f"PutItem on state table {self.table} (gate {gate.name})"):
            self._client.put_item(
                TableName=self.table, Item=confirmation_item(self._own, gate.name, names, now)
            )

    def release(self, gate: Gate, name: str, sent_at: float) -> bool:
        """Free execution ``name``'s place in ``gate`` if admitted before ``sent_at``; whether it was.

        A release sent before the admission it would end (an earlier entry's, late) frees nothing,
        nor one sent at the very moment it was recorded: an entry's own release is sent after
        its `SendTaskSuccess`, which comes after the record, so one of the same moment is an
        earlier entry's (the cap comes first; the place comes back by the execution's end).
        """
        return conditional(
            self._client,
            self.table,
            f"gate {gate.name}",
            "delete_item",
            Key={"pk": {"S": inside_partition(self._own, gate.name)}, "sk": {"S": name}},
            ConditionExpression="recorded_at < :sent",
            ExpressionAttributeValues={":sent": {"N": f"{sent_at:.6f}"}},
        )


def _key(own: str, entry: RosterEntry) -> tuple[str, str]:
    key = inside_item_key(own, entry)
    return key["pk"]["S"], key["sk"]["S"]
