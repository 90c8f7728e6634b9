"""DynamoDB: a tenant lane's roster, packed, and kept in memory by the container that holds the lease.

Items: `dispatcher.adapters.lane_roster_items`; what they mean and why: `dispatcher.core.lane_rosters`.
Kept (``kept`` given): a read compares the head's version (a `GetItem` of one small item)
and reads the roster back only when it changed — another container wrote it, or nothing
is kept. A keeper that reads it writes a new version before it writes anything else, so a
container that kept an older one reads it back. A write that fails, or leaves something
unprocessed, drops what is kept: the next read is whole. Only the lease keeper writes a
lane's roster.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from dispatcher.adapters.errors import translated
from dispatcher.adapters.lane_roster_items import (
    HEAD_KEY,
    gone_item,
    gone_key,
    head_item,
    item_key,
    pack_item,
    packs_of,
    read_packed,
)
from dispatcher.adapters.roster_calls import RosterCalls
from dispatcher.core.batching import BATCH_WRITE_LIMIT, chunks
from dispatcher.core.errors import TransientError
from dispatcher.core.lane_rosters import PLACE, KeptRoster
from dispatcher.core.rosters import RosterEntry, RosterRead
from dispatcher.core.tenants import Hold, held_key
from dispatcher.core.topology import Member

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import WriteRequestTypeDef


def _left_of(chunk: Sequence[Sequence[RosterEntry]], left: Sequence[Any]) -> list[RosterEntry]:
    """The entries of the packs a `BatchWriteItem` left unprocessed."""
    keys = {request["PutRequest"]["Item"]["sk"]["S"] for request in left}
    return [entry for pack in chunk if _pack(pack) in keys for entry in pack]


class LaneRosterTable(RosterCalls):
    """Tenant lanes' rosters: packed entries, gone items and a head, each kept warm when ``kept`` is given."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        state_machine_arn: str,
        kept: dict[str, KeptRoster] | None = None,
    ) -> None:
        """``kept``: lane → its roster as this container keeps it (None: read whole each time, as the CLI)."""
        super().__init__(client, table, state_machine_arn)
        self._kept = kept

    def read(self, member: Member) -> RosterRead:
        """The lane's entries and held jobs: as kept, when the head says nobody wrote since."""
        if self._kept is None:
            entries, gone, holds, _ = read_packed(
                self._query(member.name), member.name, member.state_machine_arn
            )
            kept = KeptRoster.read("", entries, gone, holds)
        else:
            kept = self._kept.get(member.name) or KeptRoster("")
            if not kept.version or self._version(member.name) != kept.version:
                kept = self._load(member.name, member.state_machine_arn)
        return RosterRead(list(kept.entries.values()), [], held=tuple(kept.holds.values()))

    def _version(self, member: str) -> str | None:
        """The head's version, read consistently (None: no head yet)."""
        with translated(f"GetItem on state table {self.table}"):
            item = self._client.get_item(
                TableName=self.table, Key=item_key(self._own, member, HEAD_KEY), ConsistentRead=True
            ).get("Item")
        return None if item is None else str(item["version"]["S"])

    def _load(self, member: str, state_machine_arn: str) -> KeptRoster:
        """Read the roster whole, then write a new head: from now on, this container keeps it."""
        kept_by_member = {} if self._kept is None else self._kept
        kept_by_member.pop(member, None)
        entries, gone, holds, _ = read_packed(self._query(member), member, state_machine_arn)
        version = uuid.uuid4().hex
        with translated(f"PutItem on state table {self.table} (the roster's head)"):
            self._client.put_item(TableName=self.table, Item=head_item(self._own, member, version))
        kept = KeptRoster.read(version, entries, gone, holds)
        kept_by_member[member] = kept
        return kept

    def _drop(self, members: Sequence[str]) -> None:
        """Forget what is kept of these lanes: a write may or may not have been made."""
        if self._kept is not None:
            for member in members:
                self._kept.pop(member, None)

    def enter(self, entries: Sequence[RosterEntry]) -> list[RosterEntry]:
        """Write entries (keyed by `packed`) before their executions start, a pack an item; those left.

        The first `BatchWriteItem` still failing after retries raises; a later one leaves its packs.
        """
        try:
            unprocessed = self._write_packs(packs_of(entries))
        except BaseException:
            self._drop(list({entry.member for entry in entries}))
            raise
        if unprocessed:
            self._drop(list({entry.member for entry in entries}))
        else:
            self._keep(entries)
        return unprocessed

    def _write_packs(self, packs: Sequence[Sequence[RosterEntry]]) -> list[RosterEntry]:
        """Put packs in calls of 25; the entries of packs left (a later failed call leaves all its own)."""
        unprocessed: list[RosterEntry] = []
        for index, chunk in enumerate(chunks(packs, BATCH_WRITE_LIMIT)):
            try:
                left = self._batch([{"PutRequest": {"Item": pack_item(self._own, pack)}} for pack in chunk])
            except TransientError:
                if index == 0:
                    raise
                unprocessed += [entry for pack in chunk for entry in pack]
                continue
            unprocessed += _left_of(chunk, left)
        return unprocessed

    def _keep(self, entries: Sequence[RosterEntry]) -> None:
        """Add written entries to what is kept of their lanes' rosters."""
        if self._kept is None:
            return
        for entry in entries:
            kept = self._kept.get(entry.member)
            if kept is not None:
                kept.enter([entry])

    def leave(self, entries: Sequence[RosterEntry]) -> int:
        """Entries of executions that left: one gone item a lane, empty packs deleted; how many were left.

        Best effort: what is left holds its place until a later tick finds it left again.
        """
        left = 0
        by_member: dict[str, list[RosterEntry]] = {}
        for entry in entries:
            by_member.setdefault(entry.member, []).append(entry)
        for member, leaving in by_member.items():
            try:
                self._leave(member, leaving)
            except (TransientError, ClientError):
                self._drop([member])
                left += len(leaving)
        return left

    def _leave(self, member: str, entries: Sequence[RosterEntry]) -> None:
        kept = None if self._kept is None else self._kept.get(member)
        if kept is None:
            kept = self._load(member, entries[0].state_machine_arn)
        key = gone_key()
        leaving = kept.leave(entries, key)
        requests: list[WriteRequestTypeDef] = []
        if leaving.gone:
            now = max(entry.recorded_at for entry in entries)
            requests.append({"PutRequest": {"Item": gone_item(self._own, member, key, leaving.gone, now)}})
        requests += [{"DeleteRequest": {"Key": item_key(self._own, member, item)}} for item in leaving.delete]
        for chunk in chunks(requests, BATCH_WRITE_LIMIT):
            if self._batch(list(chunk)):
                raise TransientError(f"the state table left roster items of {member} unprocessed")
        kept.left(entries, key, leaving)

    def hold(self, member: Member, holds: Sequence[Hold]) -> None:
        """Note held jobs in the lane's roster; raises unless each is written."""
        try:
            self._hold(member, holds)
        except BaseException:
            self._drop([member.name])
            raise
        kept = None if self._kept is None else self._kept.get(member.name)
        if kept is not None:
            kept.holds.update({hold.group: hold for hold in holds})

    def tidy(self, member: Member, keys: Sequence[str]) -> int:
        """Delete held jobs' items by key (the jobs are shown again); how many were left."""
        left = self._tidy(member, keys)
        if left:
            self._drop([member.name])
            return left
        kept = None if self._kept is None else self._kept.get(member.name)
        if kept is not None:
            tidied = set(keys)
            kept.holds = {group: hold for group, hold in kept.holds.items() if held_key(group) not in tidied}
        return 0


def _pack(pack: Sequence[RosterEntry]) -> str:
    return pack[0].key.rpartition(PLACE)[0]
