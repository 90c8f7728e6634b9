"""A pool's free slots among its lanes: priorities first, equal shares, no slot idle, no room passed."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from dispatcher.core.allocation import UNBOUNDED, Allocation, Claim, room_of, round_parts, share
from dispatcher.core.batching import ROUND_SIZE
from dispatcher.core.counting import PoolCount, pool_count, pool_running
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.topology import DEFAULT, Lane, Pool, Topology


def test_equal_lanes_share_equally_and_the_first_take_the_indivisible_rest() -> None:
    """Equal lanes share equally, and the first take the indivisible rest."""
    assert share(10, {"a": UNBOUNDED, "b": UNBOUNDED, "c": UNBOUNDED}) == {"a": 4, "b": 3, "c": 3}


def test_what_a_small_room_leaves_goes_to_the_others() -> None:
    """What a small room leaves goes to the others."""
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
    """A share fills every slot it can, and is fair."""
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
    """A lower priority gets nothing until every higher lane is spent."""
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
    """What a drained lane leaves goes to its equals first."""
    allocation = Allocation(free=9, claims=[Claim("a", 1), Claim("b", 1), Claim("c", 1), Claim("low", 0)])
    assert allocation.next_pass() == {"a": 3, "b": 3, "c": 3}
    allocation.took("a", 3, 0)  # a had nothing visible
    allocation.took("b", 3, 3)
    allocation.took("c", 3, 3)
    assert allocation.next_pass() == {"b": 2, "c": 1}
    allocation.took("b", 2, 2)
    allocation.took("c", 1, 1)
    assert allocation.next_pass() == {}  # nothing free: low never starts


def test_the_rest_of_a_pass_goes_to_the_lanes_that_started_least_so_each_gets_its_share() -> None:
    """F 2, three equal lanes, the first with nothing visible: each of the other two starts one.

    The first pass's rest (2 of 3) goes to the first two; the empty one's slot then goes to
    the one that started nothing yet, not again to the one that already started.
    """
    allocation = Allocation(free=2, claims=[Claim("empty", 0), Claim("lane", 0), Claim("gate", 0)])
    assert allocation.next_pass() == {"empty": 1, "lane": 1}
    allocation.took("empty", 1, 0)
    allocation.took("lane", 1, 1)
    assert allocation.next_pass() == {"gate": 1}


def test_a_stopped_pool_offers_nothing_more_and_a_spent_lane_is_skipped() -> None:
    """A stopped pool offers nothing more, and a spent lane is skipped."""
    allocation = Allocation(free=4, claims=[Claim("a", 0), Claim("b", 0)])
    allocation.took("a", 2, 2, spent=True)
    assert allocation.next_pass() == {"b": 2}
    allocation.stop()
    assert allocation.next_pass() == {}
    assert Allocation(free=0, claims=[Claim("a", 0)]).next_pass() == {}
    assert Allocation(free=3, claims=[Claim("a", 0, room=0)]).next_pass() == {}


def test_a_lanes_room_is_its_own_max_less_its_running_within_its_rate_and_zero_when_paused() -> None:
    """A lane's room is its own MAX less its RUNNING, within its rate's tokens, and 0 when paused."""
    assert room_of(None, 7) == UNBOUNDED
    assert room_of(4, 1) == 3
    assert room_of(4, 6) == 0
    assert room_of(4, 1, tokens=2) == 2
    assert room_of(None, 0, tokens=-1) == 0
    assert room_of(None, 0, paused=True) == 0


def test_a_round_takes_whole_receive_batches_and_the_small_rests_first() -> None:
    """Twenty lanes of 13: ten batches of 10, then the threes with batches again; two receives a lane."""
    lanes = {f"lane-{index}": 13 for index in range(20)}
    first = round_parts(lanes)
    assert first == {f"lane-{index}": 10 for index in range(10)}
    left = {lane: count - first.get(lane, 0) for lane, count in lanes.items()}
    second = round_parts(left)
    assert all(second[f"lane-{index}"] == 3 for index in range(10)), "a rest never waits behind batches"
    assert sum(second.values()) <= ROUND_SIZE
    assert round_parts({"a": 7, "b": 250}) == {"a": 7, "b": 90}
    assert round_parts({"a": 13, "b": 13}) == {"a": 13, "b": 13}, "a lane's last batch takes its rest along"


@given(st.integers(min_value=0, max_value=400))
def test_one_lanes_round_is_what_it_was_before_lanes(left: int) -> None:
    """One lane's part of a round is min(100, what it has left), as it always was."""
    assert round_parts({"default": left}) == ({"default": min(ROUND_SIZE, left)} if left else {})


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.integers(min_value=0, max_value=300), max_size=25))
def test_rounds_start_every_lanes_part_within_the_round_size(left: dict[str, int]) -> None:
    """Round after round: never above a round's size nor a lane's part, never empty while a lane has some."""
    left = dict(left)
    rounds = 0
    while any(left.values()):
        parts = round_parts(left)
        assert parts, "a round always takes something"
        assert sum(parts.values()) <= ROUND_SIZE
        for lane, count in parts.items():
            assert 0 < count <= left[lane]
            left[lane] -= count
        rounds += 1
        assert rounds <= 1000


def test_the_tick_turns_which_lanes_a_round_gives_its_batches_to_first() -> None:
    """Twenty equal lanes, ten batches a round: over twenty ticks each lane is in the first round ten times.

    A tick cut short after its first round (the invocation's time, a throttle) favours no lane for long.
    """
    lanes = {f"lane-{index}": 13 for index in range(20)}
    firsts = Counter(lane for turn in range(20) for lane in round_parts(lanes, turn))
    assert firsts == dict.fromkeys(lanes, 10)
    four = {"x": 50, "y": 60, "z": 60, "w": 60}
    assert round_parts(four, 2) == {"z": 30, "w": 30, "y": 20, "x": 20}, "most left first, then in turn"
    assert round_parts(four, 3) == {"w": 30, "y": 30, "z": 20, "x": 20}


def test_a_pools_running_counts_each_state_machine_once_and_who_is_inside_its_gates() -> None:
    """The one formula of the tick and `status`: machines once, gates' inside, free >= 0, 0 halted."""
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:"
    topology = Topology(
        pools=(Pool(DEFAULT, 5), Pool("glue", 3), Pool("off", 0)),
        members=(
            Lane(DEFAULT, DEFAULT, "q", "d", machine + "jobs"),
            Lane("urgent", DEFAULT, "q2", "d2", machine + "jobs"),
            Lane("glue", "glue", "q3", "d3", machine + "glue"),
            Lane("off", "off", "q4", "d4", machine + "off"),
            Gate("crawl", DEFAULT, "q5", "d5", machine + "crawl"),
        ),
    )
    running = {machine + "jobs": 2, machine + "glue": 4, machine + "off": 1, "gate:crawl": 1}

    def count(pool: Pool) -> PoolCount:
        return pool_count(pool, pool_running(topology, pool.name, running))

    assert count(topology.pool(DEFAULT)) == PoolCount(running=3, free=2)
    assert count(topology.pool("glue")) == PoolCount(running=4, free=0)
    assert count(topology.pool("off")) == PoolCount(running=1, free=0)
    paused = Pool(DEFAULT, 5, paused=True)
    assert count(paused) == PoolCount(running=3, free=0)
