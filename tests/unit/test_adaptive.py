"""An adaptive pool's limit: its settings, the cut on a signal, the cooldown, growth, and each signal once."""

from __future__ import annotations

import json

import pytest

from dispatcher.core.adaptive import (
    Adaptive,
    LimitState,
    PoolEnd,
    adapt,
    bounds,
    initial_limit,
    limit_of,
    reset,
)
from dispatcher.core.control import Control, parse_control, steer
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.lanes import parse_lanes
from dispatcher.core.topology import DEFAULT, Lane

GLUE = "Glue.ConcurrentRunsExceededException"
SETTINGS = Adaptive(errors=(GLUE,), min=2, decrease=0.5, cooldown_seconds=60)
DEFAULT_LANE = Lane(
    name=DEFAULT,
    pool=DEFAULT,
    queue_url="https://sqs/q.fifo",
    dead_letter_queue_url="https://sqs/d.fifo",
    state_machine_arn="arn:aws:states:us-east-1:123456789012:stateMachine:sm",
)
LANE = {
    "name": "crawl",
    "pool": "glue",
    "queue_url": "https://sqs/crawl.fifo",
    "dead_letter_queue_url": "https://sqs/crawl-dl.fifo",
    "state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:crawl",
}


def lanes(pools: object) -> str:
    """``LANES`` with ``pools`` and one lane."""
    return json.dumps({"pools": pools, "lanes": [LANE]})


def test_lanes_read_a_pools_adaptive_settings_with_their_defaults() -> None:
    """LANES gives a pool, and pool default, its adaptive settings, with the contract's defaults."""
    topology = parse_lanes(
        lanes(
            {
                "glue": {"max_concurrency": 40, "adaptive": {"errors": [GLUE]}},
                "default": {"adaptive": {"errors": ["X"], "min": 3, "decrease": 0.7, "cooldown_seconds": 0}},
            }
        ),
        DEFAULT_LANE,
        10,
    )
    assert topology.pool("glue").adaptive == Adaptive(
        errors=(GLUE,), min=1, decrease=0.5, cooldown_seconds=60
    )
    assert topology.default_pool.max_concurrency == 10
    assert topology.default_pool.adaptive == Adaptive(errors=("X",), min=3, decrease=0.7, cooldown_seconds=0)
    assert parse_lanes(None, DEFAULT_LANE, 10).default_pool.adaptive is None


@pytest.mark.parametrize(
    ("adaptive", "message"),
    [
        ({}, "LANES: pools.glue.adaptive.errors: field required"),
        ({"errors": []}, "LANES: pools.glue.adaptive.errors: list should have at least 1 item"),
        ({"errors": [3]}, "LANES: pools.glue.adaptive.errors[0]: input should be a valid string"),
        ({"errors": [" "]}, "LANES: pools.glue.adaptive.errors: an error name can't be empty"),
        (
            {"errors": [GLUE], "min": 0},
            "LANES: pools.glue.adaptive.min: input should be greater than or equal to 1",
        ),
        ({"errors": [GLUE], "min": 1.5}, "LANES: pools.glue.adaptive.min: input should be a valid integer"),
        ({"errors": [GLUE], "decrease": 1}, "LANES: pools.glue.adaptive.decrease"),
        ({"errors": [GLUE], "decrease": 0}, "LANES: pools.glue.adaptive.decrease"),
        ({"errors": [GLUE], "decrease": "0.5"}, "LANES: pools.glue.adaptive.decrease"),
        ({"errors": [GLUE], "cooldown_seconds": -1}, "LANES: pools.glue.adaptive.cooldown_seconds"),
        ({"errors": [GLUE], "cooldown_seconds": True}, "LANES: pools.glue.adaptive.cooldown_seconds"),
        ({"errors": [GLUE], "min": None}, "LANES: pools.glue.adaptive.min: null is not a value here"),
        ({"errors": [GLUE], "step": 2}, "LANES: pools.glue.adaptive.step: extra inputs are not permitted"),
    ],
)
def test_a_malformed_adaptive_names_its_field(adaptive: object, message: str) -> None:
    """Each malformed adaptive setting is a configuration error naming its field."""
    with pytest.raises(ConfigurationError) as raised:
        parse_lanes(lanes({"glue": {"max_concurrency": 4, "adaptive": adaptive}}), DEFAULT_LANE, 10)
    assert str(raised.value).startswith(message), str(raised.value)


def test_pool_default_takes_only_adaptive() -> None:
    """pools.default refuses a MAX or a pause, and names a malformed adaptive setting."""
    with pytest.raises(ConfigurationError, match=r"^LANES: pools.default: pool default is the environment's"):
        parse_lanes(lanes({"default": {"max_concurrency": 3}}), DEFAULT_LANE, 10)
    with pytest.raises(ConfigurationError, match=r"^LANES: pools.default.adaptive.decrease: "):
        parse_lanes(lanes({"default": {"adaptive": {"errors": ["X"], "decrease": 2}}}), DEFAULT_LANE, 10)
    with pytest.raises(ConfigurationError, match=r"^LANES: pools.default.paused: extra inputs"):
        parse_lanes(lanes({"default": {"paused": True}}), DEFAULT_LANE, 10)


def test_the_control_parameter_replaces_the_settings_and_turns_them_off() -> None:
    """The control parameter's adaptive replaces a pool's settings live, and false turns them off."""
    topology = parse_lanes(
        lanes({"glue": {"max_concurrency": 40, "adaptive": {"errors": [GLUE]}}}), DEFAULT_LANE, 10
    )
    replaced = steer(
        topology,
        parse_control(
            "/p",
            json.dumps(
                {
                    "pools": {
                        "glue": {"adaptive": {"errors": ["Y"], "min": 5}},
                        "default": {"adaptive": {"errors": ["Z"]}},
                    }
                }
            ),
        ),
        "/p",
    )
    assert replaced.pool("glue").adaptive == Adaptive(errors=("Y",), min=5)
    assert replaced.default_pool.adaptive == Adaptive(errors=("Z",))
    off = steer(topology, parse_control("/p", '{"pools": {"glue": {"adaptive": false}}}'), "/p")
    assert off.pool("glue").adaptive is None
    assert steer(topology, Control(), "/p").pool("glue").adaptive == topology.pool("glue").adaptive
    with pytest.raises(ConfigurationError, match=r"pools.glue.adaptive.decrease"):
        parse_control("/p", '{"pools": {"glue": {"adaptive": {"errors": ["Y"], "decrease": 1.5}}}}')
    with pytest.raises(ConfigurationError, match=r"pools.glue.adaptive"):
        parse_control("/p", '{"pools": {"glue": {"adaptive": true}}}')
    with pytest.raises(ConfigurationError, match=r"pools.default: pool default is steered by the top-level"):
        steer(topology, parse_control("/p", '{"pools": {"default": {"paused": true}}}'), "/p")


def test_limit_is_max_until_learned_and_clamped_into_its_bounds() -> None:
    """L is MAX until learned, MAX for a pool that doesn't adapt, and clamped into [min, MAX]."""
    assert bounds(SETTINGS, 10) == (2, 10)
    assert bounds(Adaptive(errors=(GLUE,), min=20), 10) == (10, 10)
    assert limit_of(None, SETTINGS, 10) == 10
    assert limit_of(LimitState(limit=4), None, 10) == 10
    assert limit_of(LimitState(limit=4), SETTINGS, 10) == 4
    assert limit_of(LimitState(limit=40), SETTINGS, 10) == 10
    assert limit_of(LimitState(limit=1), SETTINGS, 10) == 2


def test_a_signal_cuts_the_limit_once_per_cooldown() -> None:
    """Signals cut L once per cooldown, the one between ignored, and the cut is versioned."""
    state = LimitState(limit=10, version=3)
    first = adapt(
        state,
        SETTINGS,
        max_concurrency=10,
        ends=[PoolEnd("a", 100.0, GLUE), PoolEnd("b", 130.0, GLUE), PoolEnd("c", 160.1, GLUE)],
        running=10,
        now=170.0,
    )
    assert [(d.execution, d.error, d.before, d.after) for d in first.decreases] == [
        ("a", GLUE, 10, 5),
        ("c", GLUE, 5, 2),
    ]
    assert first.ignored == ("b",)
    assert first.state.limit == 2
    assert first.state.version == 4
    assert first.state.cut_by == 160.1
    assert first.state.cut_execution == "c"
    assert first.changed


def test_the_same_signal_delivered_again_never_cuts_twice() -> None:
    """A signal delivered again never cuts twice, whatever the cooldown."""
    cut = adapt(None, SETTINGS, max_concurrency=10, ends=[PoolEnd("a", 100.0, GLUE)], running=9, now=101.0)
    assert cut.state.limit == 5
    for later in (101.0, 500.0, 10_000.0):
        again = adapt(
            cut.state, SETTINGS, max_concurrency=10, ends=[PoolEnd("a", 100.0, GLUE)], running=9, now=later
        )
        assert again.decreases == ()
        assert again.state.limit == 5
    zero = Adaptive(errors=(GLUE,), cooldown_seconds=0)
    once = adapt(None, zero, max_concurrency=10, ends=[PoolEnd("a", 100.0, GLUE)] * 2, running=9, now=101.0)
    twice = adapt(
        once.state, zero, max_concurrency=10, ends=[PoolEnd("a", 100.0, GLUE)], running=9, now=102.0
    )
    assert (once.state.limit, twice.state.limit) == (5, 5)
    assert twice.ignored == ("a",)


def test_other_errors_are_not_signals_and_the_floor_is_min() -> None:
    """An error not in errors cuts nothing, and no cut goes below min."""
    state = LimitState(limit=3, changed_at=0.0)
    result = adapt(
        state,
        SETTINGS,
        max_concurrency=10,
        ends=[PoolEnd("x", 5.0, "States.TaskFailed"), PoolEnd("y", 6.0, GLUE)],
        running=3,
        now=7.0,
    )
    assert [d.after for d in result.decreases] == [2]
    lower = adapt(
        result.state, SETTINGS, max_concurrency=10, ends=[PoolEnd("z", 100.0, GLUE)], running=3, now=101.0
    )
    assert lower.state.limit == 2


def test_growth_needs_l_clean_ends_since_the_change_and_half_the_limit_used() -> None:
    """L grows by one after L clean ends since it changed, only while half of it is used."""
    state = LimitState(limit=4, changed_at=10.0)
    ends = [PoolEnd(f"e{index}", 10.0 + index) for index in range(5)]  # e0 ended at the change: not counted
    idle = adapt(state, SETTINGS, max_concurrency=10, ends=ends, running=1, now=20.0)
    assert idle.increases == 0
    assert idle.state.limit == 4
    assert idle.state.clean == 4  # kept, one L's worth at most
    busy = adapt(state, SETTINGS, max_concurrency=10, ends=ends, running=2, now=20.0)
    assert busy.increases == 1
    assert (busy.state.limit, busy.state.clean, busy.state.changed_at) == (5, 0, 20.0)
    repeated = adapt(busy.state, SETTINGS, max_concurrency=10, ends=ends, running=5, now=21.0)
    assert repeated.state == busy.state
    assert not repeated.changed


def test_growth_stops_at_max_and_a_signal_resets_the_clean_count() -> None:
    """L never grows past MAX, and a signal in the cooldown resets the clean count."""
    at_max = adapt(
        LimitState(limit=3, changed_at=0.0),
        SETTINGS,
        max_concurrency=3,
        ends=[PoolEnd(f"e{index}", 1.0 + index) for index in range(10)],
        running=3,
        now=20.0,
    )
    assert at_max.state.limit == 3
    assert at_max.state.clean == 3
    cooling = LimitState(limit=4, changed_at=100.0, cut_by=100.0, clean=3, counted_through=105.0)
    hit = adapt(
        cooling, SETTINGS, max_concurrency=10, ends=[PoolEnd("late", 120.0, GLUE)], running=4, now=121.0
    )
    assert hit.ignored == ("late",)
    assert hit.state.clean == 0
    assert hit.state.limit == 4


def test_reset_goes_back_to_max_and_forgets_the_cooldown() -> None:
    """A reset gives back MAX and forgets every signal before it."""
    state = LimitState(limit=2, version=7, changed_at=5.0, cut_by=5.0, clean=1, counted_through=9.0)
    assert reset(state, 10, 50.0) == LimitState(
        limit=10, version=8, changed_at=50.0, counted_through=9.0, since=50.0
    )
    assert reset(None, 10, 50.0) == LimitState(limit=10, version=0, changed_at=50.0, since=50.0)


def test_a_signal_that_ended_before_a_reset_never_cuts() -> None:
    """Seed 173 of the soak: a reset forgot the cooldown, and a signal still in the window cut again."""
    cut = adapt(None, SETTINGS, max_concurrency=10, ends=[PoolEnd("a", 100.0, GLUE)], running=9, now=101.0)
    after = reset(cut.state, 10, 200.0)
    again = adapt(after, SETTINGS, max_concurrency=10, ends=[PoolEnd("a", 100.0, GLUE)], running=9, now=201.0)
    assert again.decreases == ()
    assert again.state.limit == 10
    new = adapt(after, SETTINGS, max_concurrency=10, ends=[PoolEnd("b", 200.5, GLUE)], running=9, now=201.0)
    assert [d.execution for d in new.decreases] == ["b"]


FAST = Adaptive(errors=(GLUE,), min=2, initial=40, decrease=0.8, cooldown_seconds=10)


def _clean_ends(first: float, count: int, prefix: str = "e") -> list[PoolEnd]:
    return [PoolEnd(f"{prefix}{index}", first + index * 0.01) for index in range(count)]


def test_l_starts_at_initial_clamped_and_a_reset_goes_back_to_it() -> None:
    """``initial`` is where L starts and where a reset puts it, clamped into [min, MAX]; MAX without it."""
    assert initial_limit(FAST, 100) == 40
    assert initial_limit(FAST, 30) == 30
    assert initial_limit(Adaptive(errors=(GLUE,), min=5, initial=2), 100) == 5
    assert initial_limit(SETTINGS, 100) == 100
    assert limit_of(None, FAST, 100) == 40
    fresh = adapt(None, FAST, max_concurrency=100, ends=[], running=0, now=5.0)
    assert (fresh.state.limit, fresh.state.changed_at, fresh.changed) == (40, 5.0, True)
    cut = adapt(fresh.state, FAST, max_concurrency=100, ends=[PoolEnd("a", 6.0, GLUE)], running=40, now=7.0)
    assert cut.state.limit == 32
    assert reset(cut.state, initial_limit(FAST, 100), 9.0).limit == 40
    topology = parse_lanes(
        lanes({"glue": {"max_concurrency": 40, "adaptive": {"errors": [GLUE], "initial": 12}}}),
        DEFAULT_LANE,
        10,
    )
    assert topology.pool("glue").adaptive == Adaptive(errors=(GLUE,), initial=12)
    assert Adaptive(errors=(GLUE,), initial=12).as_json()["initial"] == 12
    assert "initial" not in SETTINGS.as_json()


def test_the_signals_of_one_overload_cut_deeper_a_lone_signal_exactly_by_decrease() -> None:
    """A lone signal cuts to floor(L x decrease); the signals that follow within a cooldown are evidence."""
    state = LimitState(limit=100, changed_at=0.0)
    first = adapt(state, FAST, max_concurrency=200, ends=[PoolEnd("a", 100.0, GLUE)], running=100, now=101.0)
    assert first.state.limit == 80
    assert first.state.peak == 99
    tail = [
        PoolEnd(f"t{index}", 101.0 + index * 0.2, GLUE) for index in range(30)
    ]  # 101-106.8: in the cooldown
    cooling = adapt(first.state, FAST, max_concurrency=200, ends=tail, running=100, now=107.0)
    assert cooling.decreases == ()
    assert len(cooling.ignored) == 30
    assert cooling.state.evidence == 30
    assert cooling.state.peak == 80  # each signal of the overload lowers the level it was found at
    deeper = adapt(
        cooling.state, FAST, max_concurrency=200, ends=[PoolEnd("b", 112.0, GLUE)], running=80, now=113.0
    )
    assert [(d.before, d.after) for d in deeper.decreases] == [(80, 49)]  # 80 less 31 signals, below 64
    assert deeper.state.evidence == 0
    lone = adapt(
        deeper.state, FAST, max_concurrency=200, ends=[PoolEnd("c", 200.0, GLUE)], running=49, now=201.0
    )
    assert [(d.before, d.after) for d in lone.decreases] == [(49, 39)]  # after a clean spell: exactly x 0.8
    floor = adapt(
        LimitState(limit=10, changed_at=0.0),
        FAST,
        max_concurrency=200,
        ends=[PoolEnd(f"f{index}", 1.0 + index * 0.1, GLUE) for index in range(50)],
        running=10,
        now=9.0,
    )
    assert floor.state.limit == 8
    never_below_min = adapt(
        floor.state, FAST, max_concurrency=200, ends=[PoolEnd("g", 11.5, GLUE)], running=8, now=12.0
    )
    assert never_below_min.state.limit == 2


def test_a_signal_delivered_again_keeps_the_clean_count() -> None:
    """A signal already counted, delivered again in the cooldown, resets nothing: growth isn't stalled."""
    cut = adapt(
        LimitState(limit=50), FAST, max_concurrency=100, ends=[PoolEnd("a", 10.0, GLUE)], running=50, now=11.0
    )
    counted = adapt(cut.state, FAST, max_concurrency=100, ends=_clean_ends(11.0, 5), running=40, now=12.0)
    assert counted.state.clean == 5
    again = adapt(
        counted.state, FAST, max_concurrency=100, ends=[PoolEnd("a", 10.0, GLUE)], running=40, now=13.0
    )
    assert again.state.clean == 5
    assert again.state.evidence == 0


def test_growth_searches_back_to_the_peak_holds_a_round_then_probes_faster() -> None:
    """First +1 after L clean ends; then half-way to the peak each cooldown; a round there; then 1, 2, 4..."""
    state = LimitState(limit=60, changed_at=0.0, peak=100, counted_through=0.0)
    limits = []
    now = 1.0
    for _ in range(14):
        grown = adapt(
            state, FAST, max_concurrency=200, ends=_clean_ends(now, 120, f"n{now}-"), running=200, now=now + 2
        )
        state = grown.state
        limits.append(state.limit)
        now += 11.0
    # +1; half-way to 100 capped at a quarter of L; ... ; at the peak one round, then 1, 2, 4, 8 ...
    assert limits[:8] == [61, 76, 88, 94, 97, 98, 99, 100]
    assert limits[8:] == [101, 103, 107, 115, 131, 163]
    paced = adapt(
        state,
        FAST,
        max_concurrency=200,
        ends=_clean_ends(now, 120, "p"),
        running=200,
        now=state.changed_at + 5,
    )
    assert paced.increases == 0  # within a cooldown of the last step
    signal = adapt(
        state, FAST, max_concurrency=200, ends=[PoolEnd("s", now + 1, GLUE)], running=200, now=now + 2
    )
    assert (signal.state.step, signal.state.probing, signal.state.limit) == (1, False, 130)
    capped = adapt(
        LimitState(limit=190, probing=True, step=64, changed_at=0.0),
        FAST,
        max_concurrency=200,
        ends=_clean_ends(1.0, 100),
        running=200,
        now=50.0,
    )
    assert capped.state.limit == 200  # never past MAX
    idle = adapt(
        LimitState(limit=100, probing=True, step=8, changed_at=0.0),
        FAST,
        max_concurrency=200,
        ends=_clean_ends(1.0, 100),
        running=49,
        now=50.0,
    )
    assert idle.increases == 0  # RUNNING below L / 2


def test_the_floor_is_timed_from_when_l_reached_it_and_forgotten_when_it_leaves() -> None:
    """``floor_since``: when L came down to its lowest; kept while it stays; None once it grows."""
    low = adapt(
        LimitState(limit=3, changed_at=0.0),
        FAST,
        max_concurrency=100,
        ends=[PoolEnd("a", 5.0, GLUE)],
        running=3,
        now=6.0,
    )
    assert (low.state.limit, low.state.floor_since) == (2, 6.0)
    still = adapt(low.state, FAST, max_concurrency=100, ends=[PoolEnd("b", 30.0, GLUE)], running=2, now=31.0)
    assert (still.state.limit, still.state.floor_since) == (2, 6.0)
    grown = adapt(still.state, FAST, max_concurrency=100, ends=_clean_ends(40.0, 3), running=2, now=45.0)
    assert (grown.state.limit, grown.state.floor_since) == (3, None)
