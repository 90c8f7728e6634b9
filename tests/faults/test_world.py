"""The harness's ground truth and lag model, on their own: the checks can fire, the lag is what it claims."""

from __future__ import annotations

import json

from tests.support.plans import FaultPlan, Lag
from tests.support.runs import Execution
from tests.support.world import World

START = 1_800_000_000.0
ARN = "arn:aws:states:us-east-1:123456789012:execution:jobs:"


def world(lag: Lag | None = None, max_concurrency: int = 1) -> World:
    """A world of MAX ``max_concurrency`` with the given list lag."""
    made = World(seed=7, start=START, faults=FaultPlan(lag=lag or Lag()))
    made.max_concurrency = max_concurrency
    return made


def start(at: World, name: str, seconds: float = 30.0, *, by_dispatcher: bool = True) -> None:
    """Notes execution ``name`` started in ``at`` (by the dispatcher, unless said otherwise)."""
    at.started(ARN + name, name, json.dumps({"seconds": seconds}), by_dispatcher=by_dispatcher)


def end_nothing(_: Execution) -> None:
    """Ending executions is the emulator's job; these tests only move the clock."""


def test_a_dispatcher_start_over_max_is_a_violation() -> None:
    """The second concurrent start at MAX 1 is recorded as a cap violation; a later one isn't."""
    truth = world()
    start(truth, "first", seconds=10)
    start(truth, "second")
    truth.advance(31, end_nothing)
    start(truth, "third")
    assert truth.violations == ["cap: 2 RUNNING > MAX 1 after the dispatcher started second"]


def test_a_foreign_start_counts_once_the_list_could_show_it() -> None:
    """Someone else's execution the list can't show yet doesn't make a dispatcher start a violation."""
    truth = world(Lag(start=60.0, flaky=True))
    start(truth, "foreign", seconds=600, by_dispatcher=False)
    start(truth, "ours", seconds=600)
    assert truth.violations == []
    truth.advance(60, end_nothing)
    start(truth, "late")
    assert len(truth.violations) == 1


def test_lagging_list_omits_new_and_keeps_finished_executions() -> None:
    """Each execution appears within the start lag and disappears within the end lag after it ends."""
    truth = world(Lag(start=60.0, end=60.0))
    start(truth, "job", seconds=100)
    [execution] = truth.executions.values()
    seen = []
    for _ in range(200):
        seen.append(bool(truth.listed_running()))
        truth.advance(1, end_nothing)
    first_seen = seen.index(True)
    last_seen = len(seen) - 1 - seen[::-1].index(True)
    assert first_seen == int(-(-execution.runs[0].appear_after // 1))
    assert 100 <= last_seen <= 160
    assert all(seen[first_seen : last_seen + 1])


def test_flaky_list_can_omit_an_execution_it_showed_before() -> None:
    """With flaky reads, a young execution is shown by some calls and omitted by later ones."""
    truth = world(Lag(start=60.0, flaky=True))
    start(truth, "job", seconds=600)
    truth.advance(30, end_nothing)
    answers = [bool(truth.listed_running()) for _ in range(50)]
    assert True in answers
    assert False in answers[answers.index(True) :]


def test_describe_lag_hides_a_new_execution_then_shows_it_running() -> None:
    """DescribeExecution says 'does not exist' until the describe lag is over."""
    truth = world(Lag(describe=60.0))
    start(truth, "job", seconds=600)
    [execution] = truth.executions.values()
    assert truth.described(execution.arn) is None
    truth.advance(60, end_nothing)
    assert truth.described(execution.arn) == ("RUNNING", 0)
    assert truth.described(ARN + "never") is None
