"""A pool's free slots among its lanes: priorities first, equal shares, no slot idle, no room passed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dispatcher.core.allocation import UNBOUNDED, Allocation, Claim, room_of, share


def test_equal_lanes_share_equally_and_the_first_take_the_indivisible_rest() -> None:
    assert share(10, {"a": UNBOUNDED, "b": UNBOUNDED, "c": UNBOUNDED}) == {"a": 4, "b": 3, "c": 3}


def test_what_a_small_room_leaves_goes_to_the_others() -> None:
    assert share(10, {"a": 1, "b": UNBOUNDED, "c": 2}) == {"a": 1, "b": 7, "c": 2}
    assert share(10, {"a": 0, "b": 3}) == {"a": 0, "b": 3}
    assert share(0, {"a": 5}) == {"a": 0}
    assert share(-3, {"a": 5}) == {"a": 0}
    assert share(5, {}) == {}


@given(
    free=st.integers(min_value=-2, max_value=200),
    rooms=st.dictionaries(st.sampled_from("abcdefgh"), st.integers(min_value=0, max_value=80), max_size=8),
)
def test_a_share_fills_every_slot_it_can_and_is_fair(free: int, rooms: dict[str, int]) -> None:
    shares = share(free, rooms)
    assert set(shares) == set(rooms)
    assert all(0 <= shares[lane] <= rooms[lane] for lane in rooms)
    assert sum(shares.values()) == min(max(0, free), sum(rooms.values()))  # no slot idle
    open_lanes = [lane for lane in rooms if rooms[lane] > 0]
    if open_lanes:
        # a lane below its room got at least as much as any other lane (max-min fair)
        for lane in open_lanes:
            if shares[lane] < rooms[lane]:
                assert shares[lane] >= max(shares.values()) - 1
        floor = max(0, free) // len(open_lanes)
        assert all(shares[lane] >= min(rooms[lane], floor) for lane in open_lanes)


def test_a_lower_priority_gets_nothing_until_every_higher_lane_is_spent() -> None:
    allocation = Allocation(
        free=10,
        claims=[Claim("backfill", 0), Claim("urgent", 10), Claim("reports", 10, room=2)],
    )
    assert allocation.next_pass() == {"urgent": 8, "reports": 2}
    allocation.took("urgent", 8, 3)  # its queue had 3 jobs: spent
    allocation.took("reports", 2, 2)  # its room is used up
    assert allocation.free == 5
    assert allocation.next_pass() == {"backfill": 5}
    allocation.took("backfill", 5, 5)
    assert allocation.next_pass() == {}
    assert allocation.used == {"urgent": 3, "reports": 2, "backfill": 5}


def test_what_a_drained_lane_leaves_goes_to_its_equals_first() -> None:
    allocation = Allocation(free=9, claims=[Claim("a", 1), Claim("b", 1), Claim("c", 1), Claim("low", 0)])
    assert allocation.next_pass() == {"a": 3, "b": 3, "c": 3}
    allocation.took("a", 3, 0)  # a had nothing visible
    allocation.took("b", 3, 3)
    allocation.took("c", 3, 3)
    assert allocation.next_pass() == {"b": 2, "c": 1}
    allocation.took("b", 2, 2)
    allocation.took("c", 1, 1)
    assert allocation.next_pass() == {}  # nothing free: low never starts


def test_a_stopped_pool_offers_nothing_more_and_a_spent_lane_is_skipped() -> None:
    allocation = Allocation(free=4, claims=[Claim("a", 0), Claim("b", 0)])
    allocation.took("a", 2, 2, spent=True)
    assert allocation.next_pass() == {"b": 2}
    allocation.stop()
    assert allocation.next_pass() == {}
    assert Allocation(free=0, claims=[Claim("a", 0)]).next_pass() == {}
    assert Allocation(free=3, claims=[Claim("a", 0, room=0)]).next_pass() == {}


def test_a_lanes_room_is_its_own_max_less_its_running_within_its_rate_and_zero_when_paused() -> None:
    assert room_of(None, 7) == UNBOUNDED
    assert room_of(4, 1) == 3
    assert room_of(4, 6) == 0
    assert room_of(4, 1, tokens=2) == 2
    assert room_of(None, 0, tokens=-1) == 0
    assert room_of(None, 0, paused=True) == 0
