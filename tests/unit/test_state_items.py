"""The state table's items, without AWS: every lane's records in one partition, each naming its machine."""

from __future__ import annotations

from dispatcher.adapters.state_items import (
    end_packs,
    ends_item,
    machine_suffix,
    read_items,
    records_of,
    start_packs,
    starts_item,
)
from dispatcher.core.counting import StartsToRecord
from dispatcher.core.events import EndedExecution

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
