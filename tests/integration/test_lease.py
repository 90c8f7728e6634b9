"""The tick lease: one tick at a time spends the free slots, a dead holder delays nothing for long."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from freezegun import freeze_time

from dispatcher.adapters.lease import TickLease
from dispatcher.adapters.state_items import read_items
from dispatcher.local.events import sqs_event
from dispatcher.tick.holder import ASK_POLL_SECONDS, HAND_BACK_GRACE_SECONDS
from tests.integration.conftest import Harness
from tests.support.clock import advance


def _lease_key(harness: Harness) -> dict[str, Any]:
    return {"pk": {"S": f"lease#{harness.stack.state_machine_arn}"}, "sk": {"S": "tick"}}


def _lease(harness: Harness) -> dict[str, Any] | None:
    item = harness.dynamodb.get_item(
        TableName=harness.stack.state_table, Key=_lease_key(harness), ConsistentRead=True
    )
    return item.get("Item")


def _hold(harness: Harness, held_until: float, owner: str = "another-invocation") -> None:
    harness.dynamodb.put_item(
        TableName=harness.stack.state_table,
        Item={
            **_lease_key(harness),
            "owner": {"S": owner},
            "held_until": {"N": f"{held_until:.6f}"},
            "expires_at": {"N": str(int(held_until) + 3600)},
        },
    )


def test_lease_is_let_go_after_a_tick(harness: Harness) -> None:
    """A tick takes the lease and leaves nothing behind."""
    harness.configure(2)
    harness.send("{}")
    assert harness.tick()["started"] == 1
    assert _lease(harness) is None


def test_lease_held_by_another_invocation_returns_busy_at_once(harness: Harness) -> None:
    """While another invocation holds the lease, a tick starts nothing, says busy, asks for another tick."""
    harness.configure(2)
    harness.send("{}")
    _hold(harness, time.time() + 30)
    result = harness.tick()
    assert (result["started"], result["stopped"]) == (0, "busy")
    assert harness.queue_counts() == (1, 0)
    lease = _lease(harness)
    assert lease is not None
    assert lease["owner"]["S"] == "another-invocation"
    assert lease["again"] == {"BOOL": True}


def test_lease_busy_event_tick_still_records_the_end(harness: Harness) -> None:
    """An event whose tick can't run leaves the end in the state table for the holder's next tick."""
    harness.configure(1)
    harness.send("{}", group="a")
    harness.send("{}", group="b")
    assert harness.tick()["started"] == 1
    [execution] = harness.executions("RUNNING")
    harness.finish_running()
    event = harness.status_change(execution["name"])
    _hold(harness, time.time() + 30)
    assert harness.tick(event)["stopped"] == "busy"
    harness.dynamodb.delete_item(TableName=harness.stack.state_table, Key=_lease_key(harness))
    # moto lists a stopped execution as ended at once; the record is what the lagging
    # list would need, and it is there.
    ends = harness.dynamodb.query(
        TableName=harness.stack.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"recent-start#{harness.stack.state_machine_arn}"}},
    )["Items"]
    assert [end.name for end in read_items(ends).ended] == [execution["name"]]
    assert harness.tick()["started"] == 1


def test_lease_of_a_dead_holder_expires_with_its_invocation(harness: Harness) -> None:
    """A lease whose holder's time is up is taken over: a dead tick delays the next by at most that."""
    harness.configure(2)
    harness.send("{}")
    with freeze_time(tick=True) as frozen:
        _hold(harness, time.time() + 60)
        assert harness.tick()["stopped"] == "busy"
        advance(frozen, 61)
        result = harness.tick()
    assert result["started"] == 1
    assert _lease(harness) is None


def test_lease_holder_asked_again_ticks_once_more_before_letting_go(harness: Harness) -> None:
    """An invocation that found the lease held gets its tick from the holder, within the same invocation."""
    harness.configure(5)
    harness.send(json.dumps({"job": 1}), group="a")
    asked = {"done": False}

    def ask_again(**_: Any) -> None:
        # Another invocation arrives while this one starts: it finds the lease held and
        # asks for one more tick (what `TickLease.ask_again` writes), and a job comes too.
        if not asked["done"]:
            asked["done"] = True
            harness.dynamodb.update_item(
                TableName=harness.stack.state_table,
                Key=_lease_key(harness),
                UpdateExpression="SET again = :yes",
                ExpressionAttributeValues={":yes": {"BOOL": True}},
            )
            harness.send(json.dumps({"job": 2}), group="b")

    harness.on("before-call.states.StartExecution", ask_again)
    result = harness.tick()
    assert result["ticks"] == 2
    assert result["started"] == 2
    assert _lease(harness) is None


def test_lease_holder_under_churn_ticks_at_once_for_an_ask_that_came_meanwhile(harness: Harness) -> None:
    """Every slot filled: an ask is taken at once once others have asked, then polled for a while.

    The first ask is found by a release after the short wait; once asks come, one that came
    during a tick is taken at once, and the holder polls a while for the next before letting go.
    """
    harness.configure(1)
    harness.send(json.dumps({"job": 1}), group="a")
    harness.send(json.dumps({"job": 2}), group="b")
    calls: list[str] = []
    queries = {"count": 0}

    def ask() -> None:
        calls.append("asked")
        harness.dynamodb.update_item(
            TableName=harness.stack.state_table,
            Key=_lease_key(harness),
            UpdateExpression="SET again = :yes",
            ExpressionAttributeValues={":yes": {"BOOL": True}},
        )

    def ask_during_the_first_start(**_: Any) -> None:
        if "asked" not in calls:
            ask()

    def ask_during_the_second_count(**_: Any) -> None:
        queries["count"] += 1
        if queries["count"] == 2:
            ask()

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        if params.get("Key") == _lease_key(harness):
            calls.append(f"{model.name} {params.get('UpdateExpression', '')}".strip())

    harness.on("before-call.states.StartExecution", ask_during_the_first_start)
    harness.on("before-call.dynamodb.Query", ask_during_the_second_count)
    harness.on("provide-client-params.dynamodb.UpdateItem", note)
    harness.on("provide-client-params.dynamodb.DeleteItem", note)
    result = harness.tick()
    assert (result["ticks"], result["started"], result["stopped"]) == (3, 1, "capacity")
    take = "UpdateItem REMOVE again"
    polls = round(HAND_BACK_GRACE_SECONDS / ASK_POLL_SECONDS) + 1
    assert calls == ["asked", "DeleteItem", take, "asked", take, *[take] * polls, "DeleteItem"], (
        "the first ask found by a release after the short wait; the second taken at once; then none came"
    )
    assert _lease(harness) is None


def test_lease_adapter_takes_an_ask_once_and_only_its_holders(harness: Harness) -> None:
    """`take_ask`: False with none waiting or for another owner; True once for the holder's."""
    lease = TickLease(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    now = time.time()
    assert lease.acquire("one", now, now + 30)
    assert not lease.take_ask("one")
    assert lease.ask_again("two", now)
    assert not lease.take_ask("two")
    assert lease.take_ask("one")
    assert not lease.take_ask("one")
    assert lease.let_go_unless_asked("one")
    assert _lease(harness) is None


def test_lease_holder_short_of_time_lets_go_without_another_tick(harness: Harness) -> None:
    """Asked again with too little time left, the holder lets go: the next invocation ticks."""
    harness.configure(5)
    harness.send("{}")

    def ask_again(**_: Any) -> None:
        harness.dynamodb.update_item(
            TableName=harness.stack.state_table,
            Key=_lease_key(harness),
            UpdateExpression="SET again = :yes",
            ExpressionAttributeValues={":yes": {"BOOL": True}},
        )

    harness.on("before-call.states.StartExecution", ask_again)
    result = harness.tick(remaining_seconds=10.9)
    assert result["ticks"] == 1
    assert _lease(harness) is None


def test_a_wake_that_finds_the_lease_held_tries_again_when_its_second_has_passed(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """The holder's tick for its ask may come before the producer's spared job: the wake's tick tries again.

    The holder lets go, and the producer queues a job within the wake's second (its wake
    spared), just after this invocation asked: at the end of the second it takes the lease
    and starts the job, which would otherwise wait for the schedule.
    """
    harness.configure(2)
    _hold(harness, time.time() + 30)
    asked: list[bool] = []

    def note_the_ask(params: dict[str, Any], **_: Any) -> None:
        asked.append(params.get("UpdateExpression") == "SET again = :yes")

    def then_let_go_and_queue(**_: Any) -> None:
        if asked and asked[-1]:
            asked[-1] = False
            harness.dynamodb.delete_item(TableName=harness.stack.state_table, Key=_lease_key(harness))
            harness.send("{}", group="spared")

    harness.on("provide-client-params.dynamodb.UpdateItem", note_the_ask)
    harness.on("after-call.dynamodb.UpdateItem", then_let_go_and_queue)
    event = sqs_event([json.dumps({"wake": True})], sent_at=time.time())
    with caplog.at_level(logging.INFO, logger="dispatcher"):
        result = harness.tick(event)
    assert (result["started"], result["stopped"]) == (1, "drained")
    assert harness.running() == 1
    assert [r for r in caplog.records if r.getMessage().startswith("a wake's second has passed")]
    assert _lease(harness) is None


def test_a_busy_tick_without_a_wake_to_wait_for_returns_at_once(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A wake whose second has passed, or a direct wake (no second to cover): asked, busy, no second try."""
    harness.configure(2)
    _hold(harness, time.time() + 30)
    old_wake = sqs_event([json.dumps({"wake": True})], sent_at=time.time() - 5)
    with caplog.at_level(logging.INFO, logger="dispatcher"):
        assert harness.tick(old_wake)["stopped"] == "busy"
        assert harness.tick({"wake": True})["stopped"] == "busy"
    assert not [r for r in caplog.records if r.getMessage().startswith("a wake's second has passed")]
    lease = _lease(harness)
    assert lease is not None
    assert lease["again"] == {"BOOL": True}
