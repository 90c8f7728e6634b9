"""A tenant lane's roster through boto3 against moto: packed entries, gone items, a keeper keeping it warm."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, cast

from dispatcher.adapters.item_keys import INSIDE_KIND
from dispatcher.adapters.lane_roster import LaneRosterTable
from dispatcher.adapters.lane_roster_items import ENTRIES_KIND, GONE_KIND, HEAD_KIND
from dispatcher.adapters.roster_items import inside_partition
from dispatcher.core.admission import Start
from dispatcher.core.lane_rosters import KeptRoster, packed
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.pacing import Latency
from dispatcher.core.rosters import RosterEntry
from dispatcher.core.tenants import Hold, held_key
from dispatcher.core.topology import DEFAULT, Lane
from dispatcher.tick.lane_starts import LaneStarts
from dispatcher.tick.outcomes import RoundOutcome
from dispatcher.tick.ports import Admissions
from tests.support.moto_harness import Harness


def lane(harness: Harness) -> Lane:
    """The harness's default lane."""
    return Lane(DEFAULT, DEFAULT, harness.stack.queue_url, "d.fifo", harness.stack.state_machine_arn)


def table(harness: Harness, kept: dict[str, KeptRoster] | None = None) -> LaneRosterTable:
    """The lane roster adapter over the harness's state table."""
    return LaneRosterTable(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn, kept)


def entries(harness: Harness, *names: str, at: float = 1_000.0) -> list[RosterEntry]:
    """Roster entries of the default lane for ``names``, packed as the adapter writes them."""
    arn = harness.stack.state_machine_arn
    return packed(
        (
            RosterEntry(member=DEFAULT, name=name, recorded_at=at, state_machine_arn=arn, group=f"g-{name}")
            for name in names
        ),
        write=uuid.uuid4().hex[:12],
    )


def items(harness: Harness) -> list[dict[str, Any]]:
    """Every item of the lane roster's partition."""
    response = harness.dynamodb.query(
        TableName=harness.stack.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": inside_partition(harness.stack.state_machine_arn, DEFAULT)}},
        ConsistentRead=True,
    )
    return list(response["Items"])


def kinds(harness: Harness) -> list[str]:
    """The kinds of the roster partition's items, sorted."""
    return sorted(item["kind"]["S"] for item in items(harness))


def names(roster: LaneRosterTable, harness: Harness) -> list[str]:
    """The names on the roster as ``roster`` reads it back."""
    return sorted(entry.name for entry in roster.read(lane(harness)).entries)


def test_a_rounds_entries_are_one_item_and_leaving_writes_one_gone_item_then_deletes_the_pack(
    harness: Harness,
) -> None:
    """Three entries, one item; two leave: one gone item; the last leaves: nothing but the head is left."""
    kept: dict[str, KeptRoster] = {}
    roster = table(harness, kept)
    assert roster.read(lane(harness)).entries == []
    written = entries(harness, "a", "b", "c")
    assert roster.enter(written) == []
    assert kinds(harness) == [ENTRIES_KIND, HEAD_KIND]

    assert roster.leave(written[:2]) == 0
    assert kinds(harness) == [ENTRIES_KIND, GONE_KIND, HEAD_KIND]
    assert names(table(harness), harness) == ["c"], "read whole, as the CLI does: the pack less the gone item"

    assert roster.leave(written[2:]) == 0
    assert kinds(harness) == [HEAD_KIND]
    assert names(roster, harness) == []


def test_a_holder_keeps_its_roster_until_another_container_reads_and_writes_it(harness: Harness) -> None:
    """Another keeper's read writes a new head: the first container's next read is whole, with its entries."""
    first, second = table(harness, {}), table(harness, {})
    assert first.read(lane(harness)).entries == []
    first.enter(entries(harness, "a"))
    assert names(second, harness) == ["a"]
    second.enter(entries(harness, "b", at=2_000.0))
    assert names(first, harness) == ["a", "b"], "the head changed: read back, not kept"
    assert names(second, harness) == ["a", "b"]


def test_an_older_releases_item_of_one_entry_is_read_and_deleted_when_it_leaves(harness: Harness) -> None:
    """A lane roster written an item an execution (the release before packing) still counts, and goes."""
    arn = harness.stack.state_machine_arn
    harness.dynamodb.put_item(
        TableName=harness.stack.state_table,
        Item={
            "pk": {"S": inside_partition(arn, DEFAULT)},
            "sk": {"S": "old"},
            "kind": {"S": INSIDE_KIND},
            "gate": {"S": DEFAULT},
            "lane": {"S": DEFAULT},
            "group": {"S": "g-old"},
            "recorded_at": {"N": "500.000000"},
        },
    )
    roster = table(harness, {})
    [old] = roster.read(lane(harness)).entries
    assert (old.name, old.group, old.recorded_at) == ("old", "g-old", 500.0)
    assert roster.leave([old]) == 0
    assert kinds(harness) == [HEAD_KIND]


def test_held_jobs_are_kept_with_the_roster_and_go_when_tidied(harness: Harness) -> None:
    """A hold noted is read back by another keeper; tidied, it is gone for both."""
    roster = table(harness, {})
    roster.read(lane(harness))
    hold = Hold("g-x", "m-1", "r-1", 5.0)
    roster.hold(lane(harness), [hold])
    assert roster.read(lane(harness)).held == (hold,)
    other = table(harness, {})
    assert other.read(lane(harness)).held == (hold,)
    assert other.tidy(lane(harness), [held_key("g-x")]) == 0
    assert other.read(lane(harness)).held == ()
    assert roster.read(lane(harness)).held == ()


def lane_starts(harness: Harness, *names: str) -> LaneStarts:
    """A tenant lane's part of a round that admitted ``names``, in order (no call is made here)."""
    jobs = [
        Start(QueuedMessage(message_id=name, receipt_handle=name, body="{}", group_id=f"g-{name}"), name)
        for name in names
    ]
    admissions = cast("Admissions", SimpleNamespace(arn=harness.stack.state_machine_arn))
    return LaneStarts(admissions, jobs, RoundOutcome(), lambda: 0.0, Latency(), lane=DEFAULT, roster=True)


def test_two_rounds_at_one_clock_reading_with_one_first_job_both_hold_their_places(harness: Harness) -> None:
    """A round's first job that didn't start is recorded again next tick, at a clock that stood still.

    Its pack has the same moment and first name as the last round's: it must not replace
    that one, or the executions only the last round started stop counting in their groups
    (the soak's seed 1877: two of one group RUNNING above its `max_per_group` of 1).
    """
    roster = table(harness, {})
    roster.read(lane(harness))
    first = lane_starts(harness, "again", "b", "c").to_record(set(), 1_000.0)
    assert roster.enter(first.entries) == []
    second = lane_starts(harness, "again", "d").to_record(set(), 1_000.0)
    assert roster.enter(second.entries) == []
    assert names(table(harness), harness) == ["again", "again", "b", "c", "d"], "read whole, as the CLI does"


def test_a_sized_jobs_entry_and_hold_keep_their_size_and_a_pack_of_ones_stores_none(harness: Harness) -> None:
    """Entries of 4 and 1 slots, and a hold of 3, read back whole with their sizes; ones store no sizes."""
    roster = table(harness, {})
    roster.read(lane(harness))
    written = [
        entry.model_copy(update={"slots": 4 if entry.name == "big" else 1})
        for entry in entries(harness, "big", "one")
    ]
    assert roster.enter(written) == []
    assert roster.enter(entries(harness, "plain", at=2_000.0)) == []
    roster.hold(lane(harness), [Hold("g-x", "m-1", "r-1", 5.0, "next", slots=3)])

    read = table(harness).read(lane(harness))
    assert sorted((entry.name, entry.slots) for entry in read.entries) == [
        ("big", 4),
        ("one", 1),
        ("plain", 1),
    ]
    assert [hold.slots for hold in read.held] == [3]
    packs = [item for item in items(harness) if item["kind"]["S"] == ENTRIES_KIND]
    assert sorted("slots" in item for item in packs) == [False, True], (
        "only the sized round's pack stores sizes"
    )
