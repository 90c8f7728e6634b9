"""`LANES`, validated once: without it one lane and one pool as today; every error names its field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dispatcher.core.errors import ConfigurationError, location
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.lanes import parse_lanes
from dispatcher.core.topology import DEFAULT, Lane, Pool
from dispatcher.settings import load_settings
from tests.support.lanes import ENVIRONMENT_LANE, arn, lane, parse, queue


@pytest.mark.parametrize("text", [None, "", "  ", "{}", '{"pools": {}, "lanes": [], "gates": []}'])
def test_without_lanes_there_is_the_environments_lane_in_the_environments_pool(text: str | None) -> None:
    """Without `LANES` there is the environment's lane in the environment's pool."""
    topology = parse_lanes(text, ENVIRONMENT_LANE, 7)
    assert topology.pools == (Pool(DEFAULT, 7),)
    assert topology.members_of(kind=Lane) == (ENVIRONMENT_LANE,)
    assert topology.default_lane is ENVIRONMENT_LANE
    assert topology.state_machines == (arn("jobs"),)
    assert topology.has_own_counts(ENVIRONMENT_LANE)


def test_pools_and_lanes_are_read_with_their_defaults_and_a_shared_state_machine_counts_once() -> None:
    """Pools and lanes are read with their defaults, and a shared state machine counts once."""
    topology = parse(
        {
            "pools": {"glue": {"max_concurrency": 10}},
            "lanes": [
                lane("urgent", "ingest", pool="glue", priority=10),
                lane("backfill", "ingest", pool="glue", starts_per_second=2),
                lane("reports", max_concurrency=3),
            ],
        }
    )
    assert topology.pools == (Pool(DEFAULT, 10), Pool("glue", 10))
    assert [item.name for item in topology.members_of(kind=Lane)] == [
        "default",
        "urgent",
        "backfill",
        "reports",
    ]
    urgent, backfill, reports = topology.members_of(kind=Lane)[1:]
    assert (urgent.priority, urgent.max_concurrency, urgent.starts_per_second) == (10, None, None)
    assert (backfill.priority, backfill.starts_per_second) == (0, 2.0)
    assert (reports.pool, reports.max_concurrency) == (DEFAULT, 3)
    assert topology.members_of("glue", Lane) == (urgent, backfill)
    assert topology.state_machines_of("glue") == (arn("ingest"),)
    assert topology.state_machines_of(DEFAULT) == (arn("jobs"), arn("reports"))
    assert topology.state_machines == (arn("jobs"), arn("ingest"), arn("reports"))
    assert not topology.has_own_counts(urgent)
    assert topology.has_own_counts(reports)
    assert topology.member("backfill", Lane) is backfill
    assert topology.pool("glue").max_concurrency == 10
    with pytest.raises(KeyError):
        topology.member("nope", Lane)


def test_gates_are_read_with_their_defaults_and_count_in_their_pools() -> None:
    """A gate: its queue, DLQ, state machine, pool (``default`` by default), an optional MAX, priority 0."""
    topology = parse(
        {
            "pools": {"glue": {"max_concurrency": 4}},
            "lanes": [lane("backfill", "load", pool="glue")],
            "gates": [lane("crawl", "ingest", pool="glue", max_concurrency=2), lane("api", "ingest")],
        }
    )
    crawl, api = topology.members_of(kind=Gate)
    assert crawl == Gate(
        name="crawl",
        pool="glue",
        queue_url=queue("crawl"),
        dead_letter_queue_url=queue("crawl-dead-letters"),
        state_machine_arn=arn("ingest"),
        max_concurrency=2,
    )
    assert (api.pool, api.max_concurrency, api.priority, api.paused) == (DEFAULT, None, 0, False)
    assert topology.names(Gate) == ("crawl", "api")
    assert topology.member("api", Gate) is api
    assert topology.members_of("glue", Gate) == (crawl,)
    assert topology.members_of("glue") == (topology.member("backfill", Lane), crawl)
    assert topology.state_machines == (arn("jobs"), arn("load"))
    assert topology.watched_machines == (arn("jobs"), arn("load"), arn("ingest"))
    with pytest.raises(KeyError):
        topology.member("nope", Gate)


def test_a_gate_may_guard_a_lanes_state_machine_in_another_pool() -> None:
    """The lane counts the machine's RUNNING executions in its pool; the gate its section's, in another."""
    topology = parse({"pools": {"glue": {"max_concurrency": 1}}, "gates": [lane("g", "jobs", pool="glue")]})
    assert topology.member("g", Gate).state_machine_arn == topology.default_lane.state_machine_arn


def test_a_lane_may_start_the_environments_state_machine_in_its_pool() -> None:
    """A lane may start the environment's state machine in its pool."""
    topology = parse({"lanes": [lane("urgent", "jobs", priority=1)]})
    assert topology.state_machines_of(DEFAULT) == (arn("jobs"),)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"lanes": [lane("a"), {"name": "b"}]}, "LANES: lanes[1].queue_url: field required"),
        ({"lane": []}, "LANES: lane: extra inputs are not permitted"),
        ({"lanes": [lane("a", colour="red")]}, "LANES: lanes[0].colour: extra inputs are not permitted"),
        ({"lanes": [lane("a", priority="1")]}, "LANES: lanes[0].priority: input should be a valid integer"),
        ({"lanes": [lane("a", priority=True)]}, "LANES: lanes[0].priority: input should be a valid integer"),
        ({"lanes": [lane("a", max_concurrency=-1)]}, "LANES: lanes[0].max_concurrency: input should be"),
        ({"lanes": [lane("a", starts_per_second=0)]}, "LANES: lanes[0].starts_per_second: input should be"),
        ({"lanes": [lane("a b")]}, "LANES: lanes[0].name: string should match pattern"),
        ({"lanes": [lane("x" * 41)]}, "LANES: lanes[0].name: string should match pattern"),
        ({"lanes": [{**lane("a"), "state_machine_arn": "jobs"}]}, "LANES: lanes[0].state_machine_arn:"),
        ({"pools": {"glue": {}}}, "LANES: pools.glue.max_concurrency: field required"),
        ({"pools": {"glue": {"max_concurrency": 1.5}}}, "LANES: pools.glue.max_concurrency: input should"),
        ({"pools": {"gl ue": {"max_concurrency": 1}}}, "LANES: pools.gl ue: the name: string should match"),
        (
            {"pools": {"default": {"max_concurrency": 1}}},
            "LANES: pools.default: pool default is the environment",
        ),
        ({"lanes": [lane("default")]}, "LANES: lanes[0].name: default is the environment's lane"),
        ({"lanes": [lane("a"), lane("a", "b")]}, "LANES: lanes[1].name: 'a' is already the name of lanes[0]"),
        ({"lanes": [lane("a", pool="glue")]}, "LANES: lanes[0].pool: unknown pool 'glue'"),
        (
            {"pools": {"glue": {"max_concurrency": 1}}, "lanes": [lane("a", "jobs", pool="glue")]},
            "LANES: lanes[0].pool: its state machine is the environment's lane's too, in pool 'default'",
        ),
        (
            {
                "pools": {"glue": {"max_concurrency": 1}},
                "lanes": [lane("a", "m"), lane("b", "m", pool="glue")],
            },
            "LANES: lanes[1].pool: its state machine is lanes[0]'s too, in pool 'default'",
        ),
        (
            {"lanes": [lane("a", "m"), lane("b", "m", max_concurrency=2)]},
            "LANES: lanes[1].max_concurrency: another lane starts the same state machine",
        ),
        (
            {"lanes": [lane("a", "jobs", max_concurrency=2)]},
            "LANES: lanes[0].max_concurrency: another lane starts the same state machine",
        ),
        ({"gates": [{"name": "g"}]}, "LANES: gates[0].queue_url: field required"),
        (
            {"lanes": [lane("a", max_per_group=None)]},
            "LANES: lanes[0].max_per_group: null is not a value here: leave the key out for none",
        ),
        ({"gates": [lane("g", max_concurrency=None)]}, "LANES: gates[0].max_concurrency: null"),
        ({"pools": {"glue": {"max_concurrency": None}}}, "LANES: pools.glue.max_concurrency: null"),
        ({"gates": [lane("g", priority=1)]}, "LANES: gates[0].priority: extra inputs are not permitted"),
        ({"gates": [lane("g", max_concurrency=-1)]}, "LANES: gates[0].max_concurrency: input should be"),
        ({"gates": [lane("g", pool="glue")]}, "LANES: gates[0].pool: unknown pool 'glue'"),
        ({"gates": [lane("default")]}, "LANES: gates[0].name: default is the environment's lane"),
        (
            {"lanes": [lane("a")], "gates": [lane("a", "b")]},
            "LANES: gates[0].name: 'a' is already the name of",
        ),
        (
            {"gates": [lane("g", "jobs")]},
            "LANES: gates[0].state_machine_arn: it is the environment's lane's state machine too, in pool"
            " 'default': a state machine can't be both a lane's and a gate's in one pool",
        ),
        (
            {
                "pools": {"glue": {"max_concurrency": 1}},
                "lanes": [lane("a", "m", pool="glue")],
                "gates": [lane("g", "m", pool="glue")],
            },
            "LANES: gates[0].state_machine_arn: it is lanes[0]'s state machine too, in pool 'glue'",
        ),
        (
            {"lanes": [{**lane("a"), "queue_url": queue("a").removesuffix(".fifo")}]},
            f"LANES: lanes[0].queue_url: {queue('a').removesuffix('.fifo')} is not a FIFO queue",
        ),
        (
            {"lanes": [{**lane("a"), "dead_letter_queue_url": "http://127.0.0.1:4567/123456789012/dlq"}]},
            "LANES: lanes[0].dead_letter_queue_url: http://127.0.0.1:4567/123456789012/dlq is not a FIFO",
        ),
        (
            {"gates": [lane("g"), {**lane("h"), "queue_url": queue("h") + "-old"}]},
            "LANES: gates[1].queue_url:",
        ),
    ],
)
def test_a_malformed_lanes_is_a_configuration_error_naming_the_field(document: Any, message: str) -> None:
    """A malformed `LANES` is a configuration error naming the field."""
    with pytest.raises(ConfigurationError) as raised:
        parse(document)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "LANES: not JSON: "),
        ("[]", "LANES: must be a JSON object"),
        ("null", "LANES: must be a JSON object"),
    ],
)
def test_lanes_that_are_not_a_json_object_are_a_configuration_error(text: str, message: str) -> None:
    """`LANES` that is not a JSON object is a configuration error."""
    with pytest.raises(ConfigurationError, match=f"^{message}"):
        parse_lanes(text, ENVIRONMENT_LANE, 1)


def test_a_location_is_written_as_the_contract_writes_it() -> None:
    """A location is written as the contract writes it."""
    assert location(("lanes", 1, "queue_url")) == "lanes[1].queue_url"
    assert location(("pools", "glue", "max_concurrency")) == "pools.glue.max_concurrency"
    assert location(()) == ""


def test_the_environment_gives_the_default_lane_and_lanes_adds_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The environment gives the default lane, and `LANES` adds the rest."""
    monkeypatch.setenv("QUEUE_URL", queue("jobs"))
    monkeypatch.setenv("DEAD_LETTER_QUEUE_URL", queue("dead-letters"))
    monkeypatch.setenv("STATE_MACHINE_ARN", arn("jobs"))
    monkeypatch.setenv("MAX_CONCURRENCY", "4")
    monkeypatch.setenv("STATE_TABLE", "dispatcher-state")
    assert load_settings().topology().members_of(kind=Lane) == (ENVIRONMENT_LANE,)
    monkeypatch.setenv("LANES", json.dumps({"lanes": [lane("urgent", "jobs", priority=5)]}))
    topology = load_settings().topology()
    assert topology.default_lane == ENVIRONMENT_LANE
    assert topology.member("urgent", Lane).priority == 5
    assert topology.pool(DEFAULT).max_concurrency == 4
