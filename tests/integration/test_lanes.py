"""Lanes and pools through the real handler and boto3 against moto: priorities, shares, own MAX, pools."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from freezegun import freeze_time

from dispatcher.core.errors import ConfigurationError
from dispatcher.local.account import REGION
from dispatcher.local.stack import create_lane, read_all
from tests.support.harness import lanes, running_in_moto, running_of, send
from tests.support.moto_harness import Harness


def visible(url: str) -> int:
    """How many messages on ``url`` are visible."""
    attributes = boto3.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_a_higher_priority_lane_takes_the_slots_first_and_the_rest_go_to_the_backfill(
    harness: Harness,
) -> None:
    """A higher-priority lane takes the slots first, and the rest go to the backfill."""
    urgent = create_lane(
        harness.stack.name, "urgent", state_machine_arn=harness.stack.state_machine_arn, priority=10
    )
    lanes(harness, 4, {"lanes": [urgent]})
    send(harness.stack.queue_url, [f"backfill-{index}" for index in range(10)])
    send(urgent["queue_url"], ["urgent-0", "urgent-1"])
    result = harness.tick()
    assert (result["running"], result["started"], result["free"]) == (0, 4, 4)
    started = harness.started_jobs()
    assert started[:2] == ["urgent-0", "urgent-1"], "the urgent lane starts before any backfill job"
    assert sorted(started[2:]) == ["backfill-0", "backfill-1"]
    assert harness.running() == 4


def test_an_urgent_job_overtakes_a_backfill_that_keeps_the_pool_full(harness: Harness) -> None:
    """An urgent job overtakes a backfill that keeps the pool full."""
    urgent = create_lane(
        harness.stack.name, "urgent", state_machine_arn=harness.stack.state_machine_arn, priority=1
    )
    lanes(harness, 3, {"lanes": [urgent]})
    send(harness.stack.queue_url, [f"backfill-{index}" for index in range(10)])
    assert harness.tick()["started"] == 3
    send(urgent["queue_url"], ["urgent-0"])
    assert harness.tick()["started"] == 0, "the pool is full: nothing starts, not even urgent"
    harness.sfn.stop_execution(executionArn=harness.executions("RUNNING")[0]["executionArn"])
    assert harness.tick()["started"] == 1
    assert harness.started_jobs()[-1] == "urgent-0"


def test_lanes_of_equal_priority_share_the_free_slots(harness: Harness) -> None:
    """Lanes of equal priority share the free slots."""
    other = create_lane(harness.stack.name, "other")
    lanes(harness, 6, {"lanes": [other]})
    send(harness.stack.queue_url, [f"a-{index}" for index in range(10)])
    send(other["queue_url"], [f"b-{index}" for index in range(10)])
    assert harness.tick()["started"] == 6
    assert running_of(harness, harness.stack.state_machine_arn) == 3
    assert running_of(harness, other["state_machine_arn"]) == 3


def test_a_slot_an_equal_lane_cannot_use_goes_to_the_other(harness: Harness) -> None:
    """A slot an equal lane cannot use goes to the other."""
    other = create_lane(harness.stack.name, "other")
    lanes(harness, 6, {"lanes": [other]})
    send(harness.stack.queue_url, ["a-0"])
    send(other["queue_url"], [f"b-{index}" for index in range(10)])
    assert harness.tick()["started"] == 6
    assert running_of(harness, other["state_machine_arn"]) == 5


def test_a_lanes_own_max_holds_inside_its_pool(harness: Harness) -> None:
    """A lane's own MAX holds inside its pool."""
    backfill = create_lane(harness.stack.name, "backfill", max_concurrency=2)
    lanes(harness, 5, {"lanes": [backfill]})
    send(backfill["queue_url"], [f"b-{index}" for index in range(6)])
    assert harness.tick()["started"] == 2
    assert harness.tick()["started"] == 0, "at its own MAX: the pool's free slots stay for the others"
    send(harness.stack.queue_url, [f"a-{index}" for index in range(6)])
    assert harness.tick()["started"] == 3
    assert running_of(harness, backfill["state_machine_arn"]) == 2
    assert visible(backfill["queue_url"]) == 4


def test_each_pool_caps_its_own_lanes_and_ends_of_its_state_machine_free_its_slots(harness: Harness) -> None:
    """Each pool caps its own lanes, and ends of its state machine free its slots."""
    glue = create_lane(harness.stack.name, "glue", pool="glue")
    lanes(harness, 2, {"pools": {"glue": {"max_concurrency": 3}}, "lanes": [glue]})
    send(harness.stack.queue_url, [f"a-{index}" for index in range(5)])
    send(glue["queue_url"], [f"g-{index}" for index in range(5)])
    result = harness.tick()
    assert (result["started"], result["free"]) == (5, 5)
    assert running_of(harness, harness.stack.state_machine_arn) == 2
    assert running_of(harness, glue["state_machine_arn"]) == 3
    assert harness.tick()["started"] == 0
    # one of the glue lane's executions ends: its event frees a glue slot, not a default one
    ended = harness.sfn.list_executions(stateMachineArn=glue["state_machine_arn"])["executions"][0]
    harness.sfn.stop_execution(executionArn=ended["executionArn"])
    description = harness.sfn.describe_execution(executionArn=ended["executionArn"])
    event = {
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "detail": {
            "executionArn": ended["executionArn"],
            "stateMachineArn": glue["state_machine_arn"],
            "name": ended["name"],
            "status": "ABORTED",
            "startDate": int(description["startDate"].timestamp() * 1000),
            "stopDate": int(description["stopDate"].timestamp() * 1000),
        },
    }
    assert harness.tick(event)["started"] == 1
    assert running_of(harness, glue["state_machine_arn"]) == 3
    assert running_of(harness, harness.stack.state_machine_arn) == 2


def test_a_state_machine_two_lanes_start_counts_once(harness: Harness) -> None:
    """A state machine two lanes start counts once."""
    urgent = create_lane(harness.stack.name, "urgent", state_machine_arn=harness.stack.state_machine_arn)
    lanes(harness, 4, {"lanes": [urgent]})
    for execution in range(3):
        harness.start_directly(f"someone-else-{execution}")
    send(urgent["queue_url"], ["u-0", "u-1", "u-2"])
    result = harness.tick()
    assert (result["running"], result["free"], result["started"]) == (3, 1, 1)
    assert harness.running() == 4


def test_poison_in_a_lane_goes_to_its_own_dead_letter_queue(harness: Harness) -> None:
    """Poison in a lane goes to its own dead letter queue."""
    other = create_lane(harness.stack.name, "other")
    lanes(harness, 5, {"lanes": [other]})
    boto3.client("sqs", region_name=REGION).send_message(
        QueueUrl=other["queue_url"], MessageBody="not json", MessageGroupId="g", MessageDeduplicationId="x"
    )
    send(other["queue_url"], ["fine"])
    result = harness.tick()
    assert (result["started"], result["dead_lettered"]) == (1, 1)
    [letter] = read_all(other["dead_letter_queue_url"])
    assert letter["Body"] == "not json"
    assert "DispatchError" in letter["MessageAttributes"]
    assert harness.dead_letters() == []


def test_a_paused_lane_receives_nothing_and_its_slots_go_to_the_others(harness: Harness) -> None:
    """A paused lane receives nothing and its slots go to the others."""
    other = create_lane(harness.stack.name, "other", priority=5)
    lanes(harness, 4, {"lanes": [other]})
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter,
        Value=json.dumps({"lanes": {"other": {"paused": True}}}),
        Type="String",
        Overwrite=True,
    )
    send(other["queue_url"], [f"o-{index}" for index in range(3)])
    send(harness.stack.queue_url, [f"a-{index}" for index in range(5)])
    assert harness.tick()["started"] == 4
    assert harness.queue_counts(other["queue_url"]) == (3, 0)
    assert running_of(harness, other["state_machine_arn"]) == 0


def test_the_control_parameter_steers_a_pool_and_a_lanes_max_live(harness: Harness) -> None:
    """The control parameter steers a pool's and a lane's MAX live."""
    glue = create_lane(harness.stack.name, "glue", pool="glue", max_concurrency=1)
    lanes(harness, 0, {"pools": {"glue": {"max_concurrency": 1}}, "lanes": [glue]})
    send(glue["queue_url"], [f"g-{index}" for index in range(6)])
    send(harness.stack.queue_url, ["a-0"])
    assert harness.tick()["started"] == 1, "pool default is paused by MAX 0; glue's lane MAX is 1"
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter,
        Value=json.dumps(
            {"pools": {"glue": {"max_concurrency": 10}}, "lanes": {"glue": {"max_concurrency": 4}}}
        ),
        Type="String",
        Overwrite=True,
    )
    assert harness.tick()["started"] == 3
    assert running_of(harness, glue["state_machine_arn"]) == 4
    assert visible(harness.stack.queue_url) == 1


def test_a_paused_pool_starts_nothing_while_the_others_go_on(harness: Harness) -> None:
    """A paused pool starts nothing while the others go on."""
    glue = create_lane(harness.stack.name, "glue", pool="glue")
    lanes(harness, 5, {"pools": {"glue": {"max_concurrency": 5}}, "lanes": [glue]})
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter,
        Value=json.dumps({"pools": {"glue": {"paused": True}}}),
        Type="String",
        Overwrite=True,
    )
    send(glue["queue_url"], ["g-0"])
    send(harness.stack.queue_url, ["a-0"])
    assert harness.tick()["started"] == 1
    assert visible(glue["queue_url"]) == 1


def test_a_stale_control_key_is_ignored_with_a_warning_and_the_tick_goes_on(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A lane paused, then removed from LANES: its key steers nothing, is named in a warning, stops none."""
    other = create_lane(harness.stack.name, "other")
    lanes(harness, 5, {"lanes": [other]})
    stale = {
        "lanes": {"gone": {"paused": True}},
        "pools": {"old": {"max_concurrency": 1}},
        "gates": {"g": {}},
    }
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter, Value=json.dumps(stale), Type="String", Overwrite=True
    )
    send(other["queue_url"], ["o-0"])
    send(harness.stack.queue_url, ["d-0"])
    assert harness.tick()["started"] == 2
    warnings = [record for record in caplog.records if "stale control keys" in record.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].levelname == "WARNING"
    assert warnings[0].stale_keys == ["pools.old", "lanes.gone", "gates.g"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("control", "message"),
    [
        ({"lanes": {"other": {"max_concurrency": True}}}, "lanes.other.max_concurrency"),
        ({"lanes": {"gone": {"paused": "yes"}}}, "lanes.gone.paused"),
        ({"pools": {"default": {"max_concurrency": 1}}}, "pools.default"),
    ],
)
def test_a_malformed_control_parameter_stops_the_tick_and_keeps_every_job(
    harness: Harness, control: dict[str, Any], message: str
) -> None:
    """A malformed value is a configuration error naming it, stale key or not: every job stays queued."""
    other = create_lane(harness.stack.name, "other")
    lanes(harness, 5, {"lanes": [other]})
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter, Value=json.dumps(control), Type="String", Overwrite=True
    )
    send(other["queue_url"], ["o-0"])
    with pytest.raises(ConfigurationError, match=message):
        harness.tick()
    assert harness.queue_counts(other["queue_url"]) == (1, 0)


def test_a_malformed_lanes_stops_the_tick_before_any_queue_is_read(harness: Harness) -> None:
    """A malformed `LANES` stops the tick before any queue is read."""
    harness.configure(5, lanes=json.dumps({"lanes": [{"name": "x"}]}))
    harness.send("{}")
    with pytest.raises(ConfigurationError, match=r"LANES: lanes\[0\]\.queue_url: field required"):
        harness.tick()
    assert harness.queue_counts() == (1, 0)
    assert harness.starts.calls == []


def test_the_return_value_and_the_metrics_have_each_lanes_and_each_pools_figures(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    """The return value and the metrics have each lane's and each pool's figures."""
    glue = create_lane(harness.stack.name, "glue", pool="glue")
    lanes(harness, 3, {"pools": {"glue": {"max_concurrency": 2}}, "lanes": [glue]})
    send(glue["queue_url"], ["g-0", "g-1", "g-2"])
    boto3.client("sqs", region_name=REGION).send_message(
        QueueUrl=harness.stack.queue_url,
        MessageBody="not json",
        MessageGroupId="p",
        MessageDeduplicationId="p",
    )
    result = harness.tick()
    assert (result["started"], result["dead_lettered"], result["running"], result["free"]) == (2, 1, 0, 5)
    assert result["lanes"]["glue"]["started"] == 2
    assert result["lanes"]["default"]["dead_lettered"] == 1
    assert result["pools"] == {
        "default": {"max_concurrency": 3, "running": 0, "free": 3},
        "glue": {"max_concurrency": 2, "running": 0, "free": 2},
    }
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    per_lane = {
        (doc.get("Lane"), name) for doc in documents for name in ("Started", "DeadLettered") if name in doc
    }
    assert ("glue", "Started") in per_lane
    assert ("default", "DeadLettered") in per_lane
    glue_started = next(doc for doc in documents if doc.get("Lane") == "glue" and "Started" in doc)
    assert glue_started["Started"] == [2.0]
    assert ["Lane", "service"] in [
        sorted(dims) for dims in glue_started["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
    ]
    free = next(doc for doc in documents if doc.get("Pool") == "glue" and "FreeSlots" in doc)
    assert free["FreeSlots"] == [2.0]


def test_without_lanes_the_return_value_keeps_its_keys(harness: Harness) -> None:
    """Without `LANES` the return value keeps its keys."""
    harness.send("{}")
    assert set(harness.tick()) == {
        "running",
        "free",
        "started",
        "redriven",
        "already_started",
        "dead_lettered",
        "cancelled",
        "expired",
        "released",
        "delete_failures",
        "stopped",
        "ticks",
        "oldest_running_seconds",
    }


@pytest.mark.no_cover  # scale, not coverage: the same lines run in smaller tests, measured (CONTRIBUTING)
def test_twenty_state_machines_share_the_listing_pace_in_turn_and_the_cap_holds(harness: Harness) -> None:
    """`ListExecutions`' pace is the account's: each state machine is listed in turn, none read past it.

    A lane's executions end with no event (stopped): its slots come back only when its
    state machine is listed again, while the others count from reused listings and the
    starts recorded since. The pool's cap holds on every tick.
    """
    others = [create_lane(harness.stack.name, f"lane-{index}") for index in range(19)]
    lanes(harness, 30, {"lanes": others})
    machines = [harness.stack.state_machine_arn, *(lane["state_machine_arn"] for lane in others)]
    for url in [harness.stack.queue_url, *(lane["queue_url"] for lane in others)]:
        send(url, [f"job-{index}" for index in range(3)])
    listed: list[str] = []
    harness.on(
        "before-parameter-build.states.ListExecutions",
        lambda params, **_: listed.append(params["stateMachineArn"]),
    )
    ticks = 50
    with freeze_time("2026-11-24 12:00:00") as clock:
        harness.tick()
        first = len(listed)
        for _ in range(ticks - 1):
            for arn in machines[:2]:
                for execution in harness.sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")[
                    "executions"
                ][:1]:
                    harness.sfn.stop_execution(executionArn=execution["executionArn"])
            machines.append(machines.pop(0))
            clock.tick(1.0)
            harness.tick(cold=False)
            assert sum(running_in_moto(arn) for arn in machines) <= 30
    assert first == len(machines), "a new container lists each state machine once"
    later = listed[first:]
    # within the pace, 1.5 pages a second for the account (the first tick's reads used the burst)
    assert len(later) <= 1.5 * (ticks - 1), "none read past the pace (it was 20 every 10 s)"
    assert {arn: later.count(arn) >= 2 for arn in machines} == dict.fromkeys(machines, True), "each in turn"
    assert len(harness.started_jobs()) > 30, "stopped executions' slots came back"
