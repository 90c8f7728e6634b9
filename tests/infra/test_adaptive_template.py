"""The template's adaptive pool default: four parameters, written to the control parameter; its alarm."""

from __future__ import annotations

import re

from tests.infra.template import SAMPLE_WORKFLOW_ARN, deployed, sam_template


def test_adaptive_parameters_make_pool_default_adaptive_through_the_control_parameter() -> None:
    """AdaptiveErrors (and its three companions) become the control parameter's pools.default.adaptive."""
    from dispatcher.core.adaptive import Adaptive  # noqa: PLC0415
    from dispatcher.core.control import parse_control, steer  # noqa: PLC0415
    from dispatcher.core.lanes import parse_lanes  # noqa: PLC0415
    from dispatcher.core.topology import DEFAULT, Lane  # noqa: PLC0415

    value = sam_template()["Resources"]["ControlParameter"]["Properties"]["Value"]
    topology = parse_lanes(None, Lane(DEFAULT, DEFAULT, "q.fifo", "d.fifo", SAMPLE_WORKFLOW_ARN), 5)
    plain = parse_control("/p", deployed({"MaxConcurrency": "7"})(value))
    assert plain.model_dump(exclude_none=True) == {
        "max_concurrency": 7,
        "paused": False,
        "pools": {},
        "lanes": {},
        "gates": {},
    }
    parameters = {
        "MaxConcurrency": "7",
        "AdaptiveErrors": "Glue.ConcurrentRunsExceededException,Lambda.TooManyRequestsException",
        "AdaptiveMin": "2",
        "AdaptiveDecrease": "0.7",
        "AdaptiveCooldownSeconds": "90",
    }
    steered = steer(topology, parse_control("/p", deployed(parameters)(value)), "/p")
    assert steered.default_pool.adaptive == Adaptive(
        errors=("Glue.ConcurrentRunsExceededException", "Lambda.TooManyRequestsException"),
        min=2,
        decrease=0.7,
        cooldown_seconds=90,
    )
    assert steered.default_pool.max_concurrency == 7
    started = steer(
        topology, parse_control("/p", deployed({**parameters, "AdaptiveInitial": "5"})(value)), "/p"
    )
    assert started.default_pool.adaptive == Adaptive(
        errors=("Glue.ConcurrentRunsExceededException", "Lambda.TooManyRequestsException"),
        min=2,
        initial=5,
        decrease=0.7,
        cooldown_seconds=90,
    )
    declared = sam_template()["Parameters"]
    assert re.fullmatch(declared["AdaptiveDecrease"]["AllowedPattern"], "0.5")
    assert not re.fullmatch(declared["AdaptiveDecrease"]["AllowedPattern"], "1")
    assert not re.fullmatch(declared["AdaptiveErrors"]["AllowedPattern"], "a, b")
    assert re.fullmatch(declared["AdaptiveInitial"]["AllowedPattern"], "")
    assert not re.fullmatch(declared["AdaptiveInitial"]["AllowedPattern"], "0")
    alarm = sam_template()["Resources"]["PoolAtMinimumAlarm"]["Properties"]
    # The dispatcher counts a pool once it has sat at its min for 15 minutes (the same pool all along).
    assert (alarm["MetricName"], alarm["Statistic"], alarm["Period"] * alarm["EvaluationPeriods"]) == (
        "PoolsAtMinimum",
        "Maximum",
        60,
    )
