"""A tenant lane's roster packed and kept, without AWS: packs, gone items, what a leave deletes."""

from __future__ import annotations

from dispatcher.core.lane_rosters import PACK_LIMIT, KeptRoster, pack_of, packed
from dispatcher.core.rosters import RosterEntry
from dispatcher.core.tenants import Hold

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"


def entries(*names: str, at: float = 10.0, member: str = "tenants") -> list[RosterEntry]:
    """Roster entries of ``member`` for ``names``."""
    return [
        RosterEntry(member=member, name=name, recorded_at=at, state_machine_arn=MACHINE, group=f"g-{name}")
        for name in names
    ]


def test_a_rounds_entries_are_packs_of_25_keyed_by_their_moment_first_name_and_place() -> None:
    """Sixty entries of one moment are three packs; each entry knows its pack and place."""
    keyed = packed(entries(*(f"e{index:02d}" for index in range(60))), write="w1")
    packs = {pack_of(entry)[0] for entry in keyed if pack_of(entry) is not None}  # type: ignore[index]
    assert len(packs) == 3
    assert [pack_of(entry) for entry in keyed[:2]] == [
        ("0000000010.000000#e00#w1", 0),
        ("0000000010.000000#e00#w1", 1),
    ]
    assert pack_of(keyed[PACK_LIMIT]) == ("0000000010.000000#e25#w1", 0)
    assert pack_of(entries("single")[0].model_copy(update={"key": "single"})) is None


def test_two_writes_of_one_moment_and_one_first_name_never_share_a_pack() -> None:
    """A job recorded again at the same clock reading (its first round never started it) is a new pack.

    Keyed by moment and first name alone, the second write's pack replaced the first one's
    whole, and the executions only the first held stopped counting in their groups.
    """
    first = packed(entries("again", "b", "c"), write="w1")
    second = packed(entries("again", "d"), write="w2")
    first_packs = {pack_of(entry)[0] for entry in first}  # type: ignore[index]
    second_packs = {pack_of(entry)[0] for entry in second}  # type: ignore[index]
    assert first_packs.isdisjoint(second_packs)
    kept = KeptRoster("v1")
    kept.enter([*first, *second])
    assert sorted(entry.name for entry in kept.entries.values()) == ["again", "again", "b", "c", "d"]


def test_entries_of_two_members_or_two_moments_never_share_a_pack() -> None:
    """A pack is one member's entries recorded together."""
    keyed = packed([*entries("a", "b"), *entries("c", member="other"), *entries("d", at=11.0)], write="w1")
    assert len({pack_of(entry)[0] for entry in keyed}) == 3  # type: ignore[index]


def test_a_leave_names_what_left_in_one_gone_item_and_deletes_a_pack_once_all_of_it_left() -> None:
    """Two of three leave: a gone item names them; the third leaves: its pack and that gone item go."""
    keyed = packed(entries("a", "b", "c"), write="w1")
    kept = KeptRoster("v1")
    kept.enter(keyed)
    [pack] = kept.packs

    first = kept.leave(keyed[:2], "~gone#1")
    assert (first.gone, first.delete) == ({pack: (0, 1)}, ())
    kept.left(keyed[:2], "~gone#1", first)
    assert list(kept.entries.values()) == keyed[2:]

    last = kept.leave(keyed[2:], "~gone#2")
    assert (last.gone, set(last.delete)) == ({}, {pack, "~gone#1"})
    kept.left(keyed[2:], "~gone#2", last)
    assert (kept.entries, kept.packs, kept.gone) == ({}, {}, {})


def test_a_roster_read_back_is_its_packs_less_what_gone_items_name_and_its_single_items() -> None:
    """What a new keeper reads: entries still held, the gone items, an older release's items, the holds."""
    keyed = packed(entries("a", "b"), write="w1")
    [pack] = {pack_of(entry)[0] for entry in keyed}  # type: ignore[index]
    old = entries("old")[0].model_copy(update={"key": "old"})
    hold = Hold("g-x", "m-1", "r-1", 5.0)
    kept = KeptRoster.read("v2", [*keyed, old], {"~gone#1": {pack: [0]}}, [hold])
    assert sorted(entry.name for entry in kept.entries.values()) == ["b", "old"]
    assert (kept.packs, kept.gone, kept.holds) == ({pack: {1}}, {"~gone#1": {pack}}, {"g-x": hold})
    # An older release's item goes when its execution leaves; the pack with its last entry.
    leaving = kept.leave([keyed[1], old], "~gone#2")
    assert set(leaving.delete) == {"old", pack, "~gone#1"}


def test_a_gone_item_whose_packs_are_all_gone_is_deleted_at_the_next_leave() -> None:
    """One read back naming packs deleted since (a delete that failed) goes with the next leave."""
    written = packed(entries("a"), write="w1")
    kept = KeptRoster.read("v3", written, {"~gone#old": {"0000000001.000000#x": [0]}})
    assert kept.gone == {"~gone#old": set()}
    assert kept.leave([], "~gone#new").delete == ("~gone#old",)


def test_an_entry_not_kept_leaves_nothing() -> None:
    """Leaving twice (an end learned again) writes nothing the second time."""
    keyed = packed(entries("a", "b"), write="w1")
    kept = KeptRoster("v4")
    kept.enter(keyed)
    once = kept.leave(keyed[:1], "~gone#1")
    kept.left(keyed[:1], "~gone#1", once)
    again = kept.leave(keyed[:1], "~gone#2")
    assert (again.gone, again.delete) == ({}, ())
