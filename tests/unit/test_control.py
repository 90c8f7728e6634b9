"""The control parameter's value, parsed and laid over the environment's limits, without AWS."""

from __future__ import annotations

import pytest

from dispatcher.core.control import (
    Control,
    ControlError,
    Override,
    max_source,
    mend_commands,
    parse_control,
    stale_keys,
    steer,
)
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.messages import group_problem, job_problem
from dispatcher.core.topology import DEFAULT, Lane, Pool, Topology


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{}", Control()),
        ('{"max_concurrency": 0}', Control(max_concurrency=0)),
        ('{"paused": true}', Control(paused=True)),
        ('{"max_concurrency": 12, "paused": false}', Control(max_concurrency=12, paused=False)),
    ],
)
def test_parse_control_accepts_each_key_alone_or_together(value: str, expected: Control) -> None:
    """Each key is optional; the value is read as the operator wrote it."""
    assert parse_control("/p", value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "5",
        "null",
        '{"max_concurrency": 1.5}',
        '{"max_concurrency": false}',
        '{"paused": 1}',
        '{"Paused": true}',
    ],
)
def test_parse_control_refuses_anything_else_naming_the_parameter(value: str) -> None:
    """Not JSON, not an object, a float or boolean MAX, a non-boolean pause, an unknown key: named error."""
    with pytest.raises(ConfigurationError, match="control parameter /stack/control"):
        parse_control("/stack/control", value)


ONE_LANE = Topology(
    pools=(Pool(DEFAULT, 5),),
    members=(Lane(DEFAULT, DEFAULT, "q", "d", "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"),),
)
"""The environment's lane and pool alone, MAX 5."""


def test_steer_without_a_parameter_is_the_environment() -> None:
    """No parameter (or none configured): MAX from the environment, not paused."""
    default = steer(ONE_LANE, None, "/p").default_pool
    assert (default.max_concurrency, default.paused, max_source(None, "/p"), default.halted) == (
        5,
        False,
        "environment",
        False,
    )


def test_steer_parameter_keys_override_only_what_they_set() -> None:
    """A pause alone keeps the environment's MAX; a MAX alone is not a pause."""
    pause = Control(paused=True)
    paused = steer(ONE_LANE, pause, "/p").default_pool
    assert (paused.max_concurrency, paused.halted, max_source(pause, "/p")) == (5, True, "environment")
    limit = Control(max_concurrency=9)
    limited = steer(ONE_LANE, limit, "/p").default_pool
    assert (limited.max_concurrency, limited.halted, max_source(limit, "/p")) == (9, False, "/p")


def test_steer_max_zero_halts_without_a_pause_flag() -> None:
    """MAX 0 from the parameter halts the dispatcher like a pause."""
    assert steer(ONE_LANE, Control(max_concurrency=0), "/p").default_pool.halted


def test_control_as_json_writes_only_the_keys_set() -> None:
    """What `set-max` writes on a fresh parameter is only its own key."""
    assert Control(max_concurrency=3).as_json() == '{"max_concurrency": 3}'
    steered = Control(lanes={"urgent": Override(paused=True)})
    assert steered.as_json() == '{"lanes": {"urgent": {"paused": true}}}'


MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:"
TOPOLOGY = Topology(
    pools=(Pool(DEFAULT, 5), Pool("glue", 3)),
    members=(
        Lane(DEFAULT, DEFAULT, "q", "d", MACHINE + "jobs"),
        Lane("urgent", DEFAULT, "q2", "d2", MACHINE + "jobs", priority=1),
        Lane("glue", "glue", "q3", "d3", MACHINE + "glue", max_concurrency=2),
        Gate("crawl", "glue", "q4", "d4", MACHINE + "ingest", max_concurrency=2),
    ),
)


def test_parse_control_reads_pools_lanes_and_gates_overrides() -> None:
    """`parse_control` reads the pools', lanes' and gates' overrides."""
    value = '{"pools": {"glue": {"max_concurrency": 4}}, "lanes": {"urgent": {"paused": true}}, "gates": {}}'
    assert parse_control("/p", value) == Control(
        pools={"glue": Override(max_concurrency=4)}, lanes={"urgent": Override(paused=True)}
    )
    with pytest.raises(ConfigurationError, match=r"control parameter /p is malformed: lanes\.urgent\.paused"):
        parse_control("/p", '{"lanes": {"urgent": {"paused": "yes"}}}')


def test_steer_overrides_each_pool_and_lane_and_keeps_what_it_does_not_name() -> None:
    """`steer` overrides each pool and lane, and keeps what it does not name."""
    assert steer(TOPOLOGY, None, None) is TOPOLOGY
    assert steer(TOPOLOGY, Control(), "/p") == TOPOLOGY
    steered = steer(
        TOPOLOGY,
        Control(
            max_concurrency=9,
            pools={"glue": Override(paused=True)},
            lanes={"glue": Override(max_concurrency=1), "urgent": Override(paused=True)},
        ),
        "/p",
    )
    assert steered.pools == (Pool(DEFAULT, 9), Pool("glue", 3, paused=True))
    assert steered.pool("glue").halted
    assert steered.member("glue", Lane).max_concurrency == 1
    assert steered.member("urgent", Lane).paused
    assert steered.member(DEFAULT, Lane) == TOPOLOGY.member(DEFAULT, Lane)
    assert steer(TOPOLOGY, Control(paused=True), "/p").pool(DEFAULT).halted


def test_steer_overrides_a_gates_max_and_pause_and_nothing_else() -> None:
    """``gates.<name>`` steers that gate: its MAX and pause, each key on its own."""
    steered = steer(TOPOLOGY, Control(gates={"crawl": Override(paused=True)}), "/p")
    assert steered.member("crawl", Gate) == Gate(
        "crawl", "glue", "q4", "d4", MACHINE + "ingest", 2, paused=True
    )
    assert steered.members_of(kind=Lane) == TOPOLOGY.members_of(kind=Lane)
    assert steered.pools == TOPOLOGY.pools
    resized = steer(TOPOLOGY, Control(gates={"crawl": Override(max_concurrency=0)}), "/p")
    assert (resized.member("crawl", Gate).max_concurrency, resized.member("crawl", Gate).paused) == (0, False)


@pytest.mark.parametrize(
    ("control", "stale"),
    [
        (Control(pools={"nope": Override(paused=True)}), ("pools.nope",)),
        (Control(lanes={"nope": Override(max_concurrency=0)}), ("lanes.nope",)),
        (Control(gates={"g": Override(paused=True)}), ("gates.g",)),
        (
            Control(gates={"g": Override()}, lanes={"gone": Override(), "urgent": Override(paused=True)}),
            ("lanes.gone", "gates.g"),
        ),
    ],
)
def test_a_key_naming_what_the_topology_does_not_have_is_stale_and_steers_nothing(
    control: Control, stale: tuple[str, ...]
) -> None:
    """A member removed from LANES while the parameter still steers it: its key is ignored, and named."""
    steered = steer(TOPOLOGY, control, "/p")
    assert steered.pools == TOPOLOGY.pools
    assert [lane for lane in steered.members_of(kind=Lane) if lane.name != "urgent"] == [
        lane for lane in TOPOLOGY.members_of(kind=Lane) if lane.name != "urgent"
    ]
    assert steered.members_of(kind=Gate) == TOPOLOGY.members_of(kind=Gate)
    assert stale_keys(TOPOLOGY, control) == stale
    assert stale_keys(TOPOLOGY, None) == ()
    assert stale_keys(TOPOLOGY, Control(lanes={"urgent": Override()}, gates={"crawl": Override()})) == ()


@pytest.mark.parametrize(
    ("control", "message"),
    [
        (
            Control(pools={DEFAULT: Override(max_concurrency=1)}),
            "pools.default: pool default is steered by the top-level keys",
        ),
        (
            Control(lanes={"urgent": Override(max_concurrency=1)}),
            "lanes.urgent.max_concurrency: another lane starts the same state machine",
        ),
    ],
)
def test_steer_refuses_what_the_topology_can_not_take(control: Control, message: str) -> None:
    """`steer` refuses what the topology can't take."""
    with pytest.raises(ConfigurationError, match=f"^control parameter /p: {message}"):
        steer(TOPOLOGY, control, "/p")


@pytest.mark.parametrize(
    ("group", "problem"),
    [("", "1 to 128"), ("g" * 129, "1 to 128"), ("a b", "printable ASCII"), ("é", "printable ASCII")],
)
def test_group_problem_names_what_sqs_would_refuse(group: str, problem: str) -> None:
    """A FIFO message group id is 1-128 printable ASCII characters without a space."""
    assert problem in (group_problem(group) or "")


def test_job_problem_checks_body_then_group_then_name() -> None:
    """A valid job has no problem; each invalid part is named."""
    assert job_problem('{"a": 1}', "g-1!", "name-1") is None
    assert "JSON" in (job_problem("{", "g", None) or "")
    assert "whitespace" in (job_problem("{}", "g", "a b") or "")


@pytest.mark.parametrize(
    ("key", "commands"),
    [
        ([("max_concurrency",)], ("dispatcher unset --pool default max_concurrency",)),
        ([("lanes",)], ("dispatcher unset --pool default lanes",)),
        ([("lanes", "a")], ("dispatcher unset --lane a",)),
        (
            [("lanes", "a", "paused"), ("lanes", "a", "max_per_grop"), ("gates", "g", "max_per_group")],
            ("dispatcher unset --lane a paused max_per_grop", "dispatcher unset --gate g max_per_group"),
        ),
        ([("pools", "glue", "adaptive", "decrease")], ("dispatcher unset --pool glue adaptive.decrease",)),
        (
            [("pools", "glue", "adaptive", "decrease"), ("pools", "glue", "adaptive", "errors", "0")],
            ("dispatcher unset --pool glue adaptive",),
        ),
        ([("pools", "default", "adaptive", "min")], ("dispatcher unset --pool default adaptive.min",)),
        ([("lanes", "a", "paused"), ("lanes", "a")], ("dispatcher unset --lane a",)),
    ],
)
def test_each_malformed_key_names_the_unset_that_removes_it_one_command_a_member(
    key: list[tuple[str, ...]], commands: tuple[str, ...]
) -> None:
    """A member's keys in one `unset`; its whole entry, or adaptive's errors, take what is inside too."""
    assert mend_commands(key) == commands


def test_a_malformed_parameter_says_what_is_wrong_and_how_to_mend_it() -> None:
    """The error's message ends with the commands; ``problem`` is without them; no model class is named."""
    with pytest.raises(ControlError) as raised:
        parse_control("/p", '{"lanes": {"a": 3}, "pools": {"b": {"adaptive": true}}}')
    assert raised.value.problem == (
        "control parameter /p is malformed: pools.b.adaptive: Input should be a JSON object, or false;"
        " lanes.a: Input should be a JSON object"
    )
    assert str(raised.value) == (
        f"{raised.value.problem}; mend it: dispatcher unset --pool b adaptive; dispatcher unset --lane a"
    )
