"""The tick lease: one tick at a time spends the free slots, a dead keeper delays nothing for long."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest
from freezegun import freeze_time

from dispatcher.adapters.lease import TickLease
from dispatcher.adapters.window_items import read_items
from dispatcher.core.events import Ask
from dispatcher.tick.keeper import ASK_POLL_SECONDS, HAND_BACK_GRACE_SECONDS, LeaseKeeper
from dispatcher.tick.ports import Runtime
from dispatcher.tick.report import StopReason, TickReport
from tests.support.clock import advance
from tests.support.moto_harness import Harness


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
    """An event whose tick can't run leaves the end in the state table for the keeper's next tick."""
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
    """A lease whose keeper's time is up is taken over: a dead tick delays the next by at most that."""
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
    """An invocation that found the lease held gets its tick from the keeper, within the same invocation."""
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
    during a tick is taken at once, and the keeper polls a while for the next before letting go.
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
    take = "UpdateItem REMOVE again, wakes"
    polls = round(HAND_BACK_GRACE_SECONDS / ASK_POLL_SECONDS) + 1
    assert calls == ["asked", "DeleteItem", take, "asked", take, *[take] * polls, "DeleteItem"], (
        "the first ask found by a release after the short wait; the second taken at once; then none came"
    )
    assert _lease(harness) is None


def test_lease_adapter_takes_an_ask_once_and_only_its_holders(harness: Harness) -> None:
    """`take_ask`: None with none waiting or for another owner; the ask once for the keeper's."""
    lease = TickLease(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    now = time.time()
    assert lease.acquire("one", now, now + 30)
    assert lease.take_ask("one") is None
    assert lease.ask_again("two", now)
    assert lease.take_ask("two") is None
    assert lease.take_ask("one") == Ask(None)
    assert lease.take_ask("one") is None
    assert lease.let_go_unless_asked("one") is None  # let go
    assert _lease(harness) is None


def test_an_ask_for_wakes_carries_the_newest_of_their_seconds_to_the_holder(harness: Harness) -> None:
    """Asks from two wakes' invocations: the keeper takes one ask, with the later second; then none."""
    lease = TickLease(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    now = time.time()
    assert lease.acquire("one", now, now + 30)
    assert lease.ask_again("two", now, now + 0.9)
    assert lease.ask_again("three", now, now + 0.4)  # an older wake asking later
    assert lease.ask_again("four", now)  # an end's ask
    assert lease.take_ask("one") == Ask(round(now + 0.9, 6))
    assert lease.take_ask("one") is None
    assert lease.ask_again("two", now, now + 1.5)
    assert lease.let_go_unless_asked("one") == Ask(round(now + 1.5, 6))  # asked: kept, the ask taken
    item = _lease(harness)
    assert item is not None
    assert "again" not in item
    assert "wakes" not in item
    assert lease.let_go_unless_asked("one") is None
    assert _lease(harness) is None


def test_lease_holder_short_of_time_lets_go_without_another_tick(harness: Harness) -> None:
    """Asked again with too little time left, the keeper lets go: the next invocation ticks."""
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


class _Clock:
    """A clock that a sleep moves (the keeper's time, without waiting for it)."""

    def __init__(self) -> None:
        self.now = time.time()

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _holder_and_asker(harness: Harness, clock: _Clock) -> tuple[LeaseKeeper, LeaseKeeper]:
    lease = TickLease(harness.dynamodb, harness.stack.state_table, harness.stack.state_machine_arn)
    runtime = Runtime(
        clock=lambda: clock.now,
        sleep=clock.sleep,
        remaining_seconds=lambda: 30.0,
        pool=lambda width: contextlib.nullcontext(None),  # type: ignore[arg-type]
    )
    return LeaseKeeper(lease, runtime, "keeper"), LeaseKeeper(lease, runtime, "asker")


@pytest.mark.parametrize("wake_in", [0.6, None])
def test_a_holder_asked_for_wakes_ticks_once_more_when_their_second_has_passed(
    harness: Harness, wake_in: float | None
) -> None:
    """The keeper's tick for a wake's ask drains at once: it ticks again at the wake's second, not before.

    A job its producer queued within that second, sparing its wake, is received then; an
    end's ask (no second) is one tick, as before.
    """
    clock = _Clock()
    keeper, asker = _holder_and_asker(harness, clock)
    began = clock.now
    assert keeper.take()
    assert not asker.take(None if wake_in is None else began + wake_in)
    ticks: list[float] = []

    def tick() -> TickReport:
        ticks.append(clock.now - began)
        return TickReport(stopped=StopReason.DRAINED)

    keeper.hand_back(TickReport(stopped=StopReason.DRAINED), tick, lambda: True)
    # Float seconds on the virtual clock: equal to a microsecond.
    assert ticks == pytest.approx([0.0, wake_in] if wake_in is not None else [0.0], abs=1e-6)
    assert _lease(harness) is None
