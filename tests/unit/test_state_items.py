"""The state table's items, without AWS: every lane's records in one partition, each naming its machine."""

from __future__ import annotations

import pytest

from dispatcher.adapters.inside_items import (
    confirmation_item,
    inside_item,
    inside_item_key,
    inside_partition,
    read_inside,
)
from dispatcher.adapters.state_items import (
    end_packs,
    ends_item,
    item_origins,
    machine_suffix,
    read_items,
    record_key,
    records_of,
    start_packs,
    starts_item,
)
from dispatcher.core.counting import StartsToRecord
from dispatcher.core.events import EndedExecution
from dispatcher.core.gates import Confirmation
from dispatcher.core.rerun import Origin

OWN = "arn:aws:states:us-east-1:123456789012:stateMachine:workflow"
GLUE = "arn:aws:states:us-east-1:123456789012:stateMachine:glue"
ELSEWHERE = "arn:aws:states:us-east-1:210987654321:stateMachine:glue"


def test_a_key_names_the_state_machine_only_when_it_is_not_the_partitions() -> None:
    assert machine_suffix(OWN, OWN) == machine_suffix("", OWN) == ""
    assert machine_suffix(GLUE, OWN) == "#glue"
    assert machine_suffix(ELSEWHERE, OWN) == f"#{ELSEWHERE}", "same name, another account: the ARN"


def test_one_name_in_three_machines_is_three_records_with_keys_of_their_own_in_one_item() -> None:
    lanes = [
        StartsToRecord(machine, {"job": f"g-{index}"}) for index, machine in enumerate((OWN, GLUE, ELSEWHERE))
    ]
    records = [record for lane in records_of(lanes, 1_000.0, OWN) for record in lane]
    assert len({record.sort_key for record in records}) == 3
    [pack] = start_packs(records)
    item = starts_item("pk", pack, OWN)
    assert [value["S"] for value in item["machines"]["L"]] == [GLUE, ELSEWHERE]
    window = read_items([item], OWN)
    assert window.starts == tuple(records)
    assert [record.state_machine_arn for record in window.starts] == [OWN, GLUE, ELSEWHERE]


def test_an_item_of_the_partitions_own_machine_is_what_it_was_before_lanes() -> None:
    """One lane's items carry no machine attributes: a dispatcher without lanes writes what it wrote."""
    [records] = records_of([StartsToRecord(OWN, {"a": "g", "b": "g"})], 1_000.0, OWN)
    item = starts_item("pk", records, OWN)
    assert "machines" not in item
    assert "machine_of" not in item
    assert all(record.sort_key.count("#") == 2 for record in records)
    ends = ends_item("pk", [EndedExecution(name="a", stopped_at=1.0)], 2.0, OWN)
    assert "machines" not in ends
    assert read_items([ends], OWN).ended == (EndedExecution(name="a", stopped_at=1.0, state_machine_arn=OWN),)


def test_ends_are_kept_once_per_execution_of_each_machine_with_the_latest_stop() -> None:
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
    lanes = [StartsToRecord(GLUE, {f"job-{index}": "g" for index in range(60)})]
    packs = start_packs(records_of(lanes, 1_000.0, OWN)[0])
    assert [len(pack) for pack in packs] == [25, 25, 10]


def test_an_admission_is_an_item_of_its_gates_partition_keyed_by_the_execution() -> None:
    """Admitting an execution again overwrites its item; its key tells it apart from any start."""
    [records] = records_of(
        [StartsToRecord(GLUE, {"exec-1": "group-1"}, gate="crawl", tokens={"exec-1": "digest-1"})],
        1_000.5,
        OWN,
    )
    [record] = records
    assert (record.gate, record.token, record.sort_key) == ("crawl", "digest-1", "inside#crawl#exec-1")
    item = inside_item(OWN, record)
    assert item["pk"]["S"] == inside_partition(OWN, "crawl") == f"inside#crawl#{OWN}"
    assert item["sk"]["S"] == "exec-1"
    assert int(item["expires_at"]["N"]) > 1_000 + 365 * 24 * 3600
    assert record_key(item) == record.sort_key
    assert inside_item_key(OWN, record) == {"pk": item["pk"], "sk": item["sk"]}
    [read], confirmations, _ = read_inside([item], "crawl", GLUE)
    assert read == record
    assert confirmations == []


def test_a_confirmation_sorts_after_every_admission_and_reads_back_its_names() -> None:
    item = confirmation_item(OWN, "crawl", ["b", "a", "b"], 2_000.0)
    assert item["sk"]["S"].startswith("~confirmed#")
    assert item["sk"]["S"] > "zzzz"  # after any execution name: "~" is no name's character
    records, [confirmation], _ = read_inside([item], "crawl", GLUE)
    assert records == []
    assert confirmation == Confirmation(item["sk"]["S"], 2_000.0, frozenset({"a", "b"}))


def test_a_start_has_no_admissions_item() -> None:
    [[record]] = records_of([StartsToRecord(OWN, {"job": "g"})], 1.0, OWN)
    with pytest.raises(ValueError, match="is a start, not an admission"):
        inside_item(OWN, record)


def test_each_start_keeps_the_lane_that_started_it_and_one_lane_costs_one_attribute() -> None:
    """A round's item names its lane once; an item of two lanes names each record's; an older item none."""
    lanes = [
        StartsToRecord(OWN, {"a": "g1", "b": "g2"}, lane="default"),
        StartsToRecord(OWN, {"c": "g3"}, lane="urgent"),
    ]
    mixed = [record for lane in records_of(lanes, 1_000.0, OWN) for record in lane]
    [pack] = start_packs(mixed)
    item = starts_item("pk", pack, OWN)
    assert [value["S"] for value in item["lanes"]["L"]] == ["default", "urgent"]
    assert [record.lane for record in read_items([item], OWN).starts] == ["default", "default", "urgent"]
    assert item_origins(item, OWN, OWN) == {
        "a": Origin("g1", "default"),
        "b": Origin("g2", "default"),
        "c": Origin("g3", "urgent"),
    }
    [alone] = records_of([StartsToRecord(OWN, {"d": "g"}, lane="urgent")], 2_000.0, OWN)
    single = starts_item("pk", alone, OWN)
    assert single["lane"] == {"S": "urgent"}
    assert "lanes" not in single
    assert item_origins(single, OWN, OWN) == {"d": Origin("g", "urgent")}
    [unnamed] = records_of([StartsToRecord(OWN, {"e": "g"})], 3_000.0, OWN)
    older = starts_item("pk", unnamed, OWN)
    assert "lane" not in older
    assert "lanes" not in older
    assert item_origins(older, OWN, OWN) == {"e": Origin("g", None)}
    assert item_origins(older, GLUE, OWN) == {}, "another state machine's executions are not these"
