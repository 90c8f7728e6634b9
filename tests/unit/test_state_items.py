"""The state table's items, without AWS: every lane's records in one partition, each naming its machine."""

from __future__ import annotations

from dispatcher.adapters.gate_items import confirmation_item, inside_item, inside_item_key, read_inside
from dispatcher.adapters.roster_items import inside_partition
from dispatcher.adapters.state_items import (
    end_packs,
    ends_item,
    item_origins,
    ledger_starts_of,
    machine_suffix,
    start_packs,
    starts_item,
    void_item,
)
from dispatcher.adapters.window_items import read_items
from dispatcher.core.counting import LedgerRequest
from dispatcher.core.events import EndedExecution
from dispatcher.core.gates import Confirmation, GateEntry
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.rerun import Origin
from dispatcher.core.rosters import RosterEntry
from dispatcher.core.topology import Lane

OWN = "arn:aws:states:us-east-1:123456789012:stateMachine:workflow"
GLUE = "arn:aws:states:us-east-1:123456789012:stateMachine:glue"
ELSEWHERE = "arn:aws:states:us-east-1:210987654321:stateMachine:glue"


def test_a_key_names_the_state_machine_only_when_it_is_not_the_partitions() -> None:
    """A key names the state machine only when it is not the partition's."""
    assert machine_suffix(OWN, OWN) == machine_suffix("", OWN) == ""
    assert machine_suffix(GLUE, OWN) == "#glue"
    assert machine_suffix(ELSEWHERE, OWN) == f"#{ELSEWHERE}", "same name, another account: the ARN"


def test_one_name_in_three_machines_is_three_records_with_keys_of_their_own_in_one_item() -> None:
    """One name in three machines is three records with keys of their own in one item."""
    lanes = [
        LedgerRequest(machine, {"job": f"g-{index}"}) for index, machine in enumerate((OWN, GLUE, ELSEWHERE))
    ]
    records = [record for lane in ledger_starts_of(lanes, 1_000.0, OWN) for record in lane]
    assert len({record.sort_key for record in records}) == 3
    [pack] = start_packs(records)
    item = starts_item("pk", pack, OWN)
    assert [value["S"] for value in item["machines"]["L"]] == [GLUE, ELSEWHERE]
    window = read_items([item], OWN)
    assert window.starts == tuple(records)
    assert [record.state_machine_arn for record in window.starts] == [OWN, GLUE, ELSEWHERE]


def test_an_item_of_the_partitions_own_machine_is_what_it_was_before_lanes() -> None:
    """One lane's items carry no machine attributes: a dispatcher without lanes writes what it wrote."""
    [records] = ledger_starts_of([LedgerRequest(OWN, {"a": "g", "b": "g"})], 1_000.0, OWN)
    item = starts_item("pk", records, OWN)
    assert "machines" not in item
    assert "machine_of" not in item
    assert all(record.sort_key.count("#") == 2 for record in records)
    ends = ends_item("pk", [EndedExecution(name="a", stopped_at=1.0)], 2.0, OWN)
    assert "machines" not in ends
    assert read_items([ends], OWN).ended == (EndedExecution(name="a", stopped_at=1.0, state_machine_arn=OWN),)


def test_ends_are_kept_once_per_execution_of_each_machine_with_the_latest_stop() -> None:
    """Ends are kept once per execution of each machine, with the latest stop."""
    ended = [
        EndedExecution(name="job", stopped_at=1.0),
        EndedExecution(name="job", stopped_at=3.0, state_machine_arn=OWN),
        EndedExecution(name="job", stopped_at=2.0, state_machine_arn=GLUE),
    ]
    [pack] = end_packs(ended, OWN)
    assert sorted((end.state_machine_arn, end.stopped_at) for end in pack) == [(GLUE, 2.0), (OWN, 3.0)]
    window = read_items([ends_item("pk", pack, 4.0, OWN)], OWN)
    assert sorted((end.state_machine_arn, end.stopped_at) for end in window.ended) == [
        (GLUE, 2.0),
        (OWN, 3.0),
    ]


def test_a_round_of_more_than_25_starts_is_items_of_25() -> None:
    """A round of more than 25 starts is items of 25."""
    lanes = [LedgerRequest(GLUE, {f"job-{index}": "g" for index in range(60)})]
    packs = start_packs(ledger_starts_of(lanes, 1_000.0, OWN)[0])
    assert [len(pack) for pack in packs] == [25, 25, 10]


CRAWL = Gate("crawl", "default", "q.fifo", "d.fifo", GLUE)
TENANTS = Lane("tenants", "default", "q.fifo", "d.fifo", GLUE, max_per_group=2)


def test_an_admission_is_an_item_of_its_gates_partition_keyed_by_the_execution() -> None:
    """Admitting an execution again overwrites its item; its key tells it apart from any start."""
    entry = GateEntry(
        member="crawl",
        name="exec-1",
        recorded_at=1_000.5,
        state_machine_arn=GLUE,
        group="group-1",
        token="digest-1",
    )
    item = inside_item(OWN, entry)
    assert item["pk"]["S"] == inside_partition(OWN, "crawl") == f"inside#crawl#{OWN}"
    assert item["sk"]["S"] == "exec-1"
    assert (item["gate"]["S"], item["token"]["S"]) == ("crawl", "digest-1")
    assert int(item["expires_at"]["N"]) > 1_000 + 365 * 24 * 3600
    assert inside_item_key(OWN, entry) == {"pk": item["pk"], "sk": item["sk"]}
    [read], confirmations, _ = read_inside([item], CRAWL)
    assert read == entry
    assert confirmations == []


def test_a_confirmation_sorts_after_every_admission_and_reads_back_its_names() -> None:
    """A confirmation sorts after every admission and reads back its names."""
    item = confirmation_item(OWN, "crawl", ["b", "a", "b"], 2_000.0)
    assert item["sk"]["S"].startswith("~confirmed#")
    assert item["sk"]["S"] > "zzzz"  # after any execution name: "~" is no name's character
    records, [confirmation], _ = read_inside([item], CRAWL)
    assert records == []
    assert confirmation == Confirmation(item["sk"]["S"], 2_000.0, frozenset({"a", "b"}))


def test_a_tenant_lanes_entry_names_its_lane_holds_no_token_and_reads_back_as_a_lanes() -> None:
    """A lane's roster entry is not an admission: no token, and it never reads back as one."""
    entry = RosterEntry(member="tenants", name="job", recorded_at=1.0, state_machine_arn=GLUE, group="g")
    item = inside_item(OWN, entry)
    assert item["lane"] == item["gate"] == {"S": "tenants"}
    assert "token" not in item
    [read], _, _ = read_inside([item], TENANTS)
    assert read == entry
    assert not isinstance(read, GateEntry)


def test_each_start_keeps_the_lane_that_started_it_and_one_lane_costs_one_attribute() -> None:
    """A round's item names its lane once; an item of two lanes names each record's; an older item none."""
    lanes = [
        LedgerRequest(OWN, {"a": "g1", "b": "g2"}, lane="default"),
        LedgerRequest(OWN, {"c": "g3"}, lane="urgent"),
    ]
    mixed = [record for lane in ledger_starts_of(lanes, 1_000.0, OWN) for record in lane]
    [pack] = start_packs(mixed)
    item = starts_item("pk", pack, OWN)
    assert [value["S"] for value in item["lanes"]["L"]] == ["default", "urgent"]
    assert [record.lane for record in read_items([item], OWN).starts] == ["default", "default", "urgent"]
    assert item_origins(item, OWN, OWN) == {
        "a": Origin("g1", "default"),
        "b": Origin("g2", "default"),
        "c": Origin("g3", "urgent"),
    }
    [alone] = ledger_starts_of([LedgerRequest(OWN, {"d": "g"}, lane="urgent")], 2_000.0, OWN)
    single = starts_item("pk", alone, OWN)
    assert single["lane"] == {"S": "urgent"}
    assert "lanes" not in single
    assert item_origins(single, OWN, OWN) == {"d": Origin("g", "urgent")}
    [unnamed] = ledger_starts_of([LedgerRequest(OWN, {"e": "g"})], 3_000.0, OWN)
    older = starts_item("pk", unnamed, OWN)
    assert "lane" not in older
    assert "lanes" not in older
    assert item_origins(older, OWN, OWN) == {"e": Origin("g", None)}
    assert item_origins(older, GLUE, OWN) == {}, "another state machine's executions are not these"


def test_a_start_of_another_machine_first_in_its_item_reads_back_under_the_key_a_void_names() -> None:
    """Lane glue's round alone: read back, each start has the key it was written with, so its void applies.

    The item kept the machine's name as its write id (its key's last field), so a start
    voided at once (cancelled, never started) still counted until its review, 90 s.
    """
    [records] = ledger_starts_of([LedgerRequest(GLUE, {"cancelled": "g", "started": "h"})], 1_000.0, OWN)
    window = read_items([starts_item("pk", records, OWN)], OWN)
    assert window.starts == tuple(records)
    voided = read_items([starts_item("pk", records, OWN), void_item("pk", records[:1], 1_001.0)], OWN)
    assert [record.name for record in voided.starts] == ["started"]
