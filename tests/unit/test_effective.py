"""Each member's effective settings and their sources, and the queues the ticks keep, without AWS."""

from __future__ import annotations

from dispatcher.core.control import Control
from dispatcher.core.effective import Setting, settings, shown
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.member_queues import members_of, removed, to_record
from dispatcher.core.topology import DEFAULT, Lane, Pool, Topology

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:"


def topology() -> Topology:
    """A pool with a group-limited lane, a fair-share bounded lane and a plain one."""
    default = Lane(DEFAULT, DEFAULT, "q.fifo", "d.fifo", ARN + "jobs", max_per_group=2)
    tenants = Lane("tenants", DEFAULT, "t.fifo", "td.fifo", ARN + "t", fair_share=True, max_wait_seconds=60)
    plain = Lane("plain", DEFAULT, "p.fifo", "pd.fifo", ARN + "p")
    gate = Gate("crawl", DEFAULT, "g.fifo", "gd.fifo", ARN + "g", max_per_group=1)
    return Topology(pools=(Pool(DEFAULT, 5),), members=(default, tenants, plain, gate))


def test_each_value_comes_from_the_variable_lanes_or_the_parameter_and_unset_ones_are_left_out() -> None:
    """Each setting's source is lane default's variable, LANES or the parameter; unset keys are not listed."""
    control = Control.model_validate(
        {"lanes": {"tenants": {"max_per_group": 3}, "plain": {"fair_share": False}}, "gates": {"crawl": {}}}
    )
    found = {(each.member, each.key): each for each in settings(topology(), control)}
    assert found[(DEFAULT, "max_per_group")] == Setting(
        "lane", DEFAULT, "max_per_group", 2, "MAX_PER_GROUP", 2
    )
    assert found[("tenants", "max_per_group")] == Setting(
        "lane", "tenants", "max_per_group", 3, "parameter", None
    )
    assert found[("tenants", "fair_share")].source == "LANES"
    assert found[("tenants", "max_wait_seconds")].as_json() == {
        "value": 60,
        "source": "LANES",
        "configured": 60,
    }
    assert found[("plain", "fair_share")] == Setting("lane", "plain", "fair_share", False, "parameter", False)
    assert found[("crawl", "max_per_group")].source == "LANES"
    assert ("plain", "max_per_group") not in found
    assert (DEFAULT, "fair_share") not in found
    assert len(found) == 6
    assert len(settings(topology(), None)) == 4


def test_values_are_shown_as_the_tables_write_them() -> None:
    """None, booleans and integers are written as the tables show them."""
    assert [shown(value) for value in (None, True, False, 3)] == ["-", "true", "false", "3"]


def test_the_members_queues_are_kept_with_the_removed_ones_and_written_only_when_they_change() -> None:
    """Removed members' queues are kept, and a write is asked only when the configured members change."""
    current = members_of(topology())
    assert set(current) == {"lanes.default", "lanes.tenants", "lanes.plain", "gates.crawl"}
    assert current["lanes.tenants"] == {"queue_url": "t.fifo", "dead_letter_queue_url": "td.fifo"}
    assert to_record(None, current) == current, "never kept: written"
    assert to_record(current, current) is None, "kept as it is: no write"
    gone = {"queue_url": "old.fifo", "dead_letter_queue_url": "oldd.fifo"}
    recorded = {**current, "lanes.old": gone}
    assert to_record(recorded, current) is None, "a removed member is kept, and that is no change"
    assert removed(recorded, current) == {"lanes.old": gone}
    moved = {**current, "lanes.plain": {"queue_url": "p2.fifo", "dead_letter_queue_url": "pd.fifo"}}
    assert to_record(recorded, moved) == {**moved, "lanes.old": gone}
