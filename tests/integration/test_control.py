"""Live control: the SSM control parameter overrides MAX and pauses, read through Powertools."""

from __future__ import annotations

import json

import pytest
from freezegun import freeze_time

from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS
from dispatcher.core.errors import ConfigurationError
from tests.support.clock import advance
from tests.support.moto_harness import Harness


def _control(harness: Harness, value: str) -> None:
    harness.ssm.put_parameter(
        Name=harness.stack.control_parameter, Value=value, Type="String", Overwrite=True
    )


def test_control_missing_parameter_keeps_the_environment_max(harness: Harness) -> None:
    """No parameter (a stack deployed before it existed): MAX_CONCURRENCY applies."""
    harness.configure(2)
    for job in range(3):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    assert harness.tick()["started"] == 2


def test_control_max_overrides_the_environment(harness: Harness) -> None:
    """The parameter's max_concurrency wins over MAX_CONCURRENCY."""
    harness.configure(1)
    _control(harness, '{"max_concurrency": 3}')
    for job in range(5):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    assert harness.tick()["started"] == 3
    assert harness.running() == 3


def test_control_paused_starts_nothing_and_loses_nothing(harness: Harness) -> None:
    """Paused: no start, every message stays queued and visible, free is 0."""
    harness.configure(5)
    _control(harness, '{"max_concurrency": 5, "paused": true}')
    for job in range(3):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    result = harness.tick()
    assert (result["started"], result["free"], result["stopped"]) == (0, 0, "paused")
    assert harness.queue_counts() == (3, 0)
    _control(harness, '{"max_concurrency": 5, "paused": false}')
    assert harness.tick()["started"] == 3


def test_control_zero_max_pauses(harness: Harness) -> None:
    """max_concurrency 0 in the parameter pauses like MAX_CONCURRENCY 0."""
    harness.configure(5)
    _control(harness, '{"max_concurrency": 0}')
    harness.send("{}")
    assert harness.tick()["stopped"] == "paused"
    assert harness.queue_counts() == (1, 0)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("not json", "is not JSON"),
        ("[1]", "must be a JSON object"),
        ('{"max_concurrency": true}', "max_concurrency"),
        ('{"max_concurrency": -1}', "max_concurrency"),
        ('{"max_concurrency": "5"}', "max_concurrency"),
        ('{"paused": "yes"}', "paused"),
        ('{"max": 5}', "max"),
    ],
    ids=["not-json", "not-object", "boolean-max", "negative", "string-max", "string-paused", "unknown-key"],
)
def test_control_malformed_value_is_a_configuration_error_naming_it(
    harness: Harness, value: str, problem: str
) -> None:
    """A malformed value stops the tick loudly, names the parameter, and leaves the messages queued."""
    harness.configure(5)
    _control(harness, value)
    harness.send("{}")
    with pytest.raises(ConfigurationError, match=problem) as raised:
        harness.tick()
    assert harness.stack.control_parameter in str(raised.value)
    assert harness.queue_counts() == (1, 0)
    assert harness.running() == 0


def test_control_read_is_cached_for_at_most_five_seconds(harness: Harness) -> None:
    """A warm container reuses the read for CONTROL_MAX_AGE_SECONDS, then sees the change."""
    harness.configure(5)
    _control(harness, '{"paused": true}')
    harness.send("{}")
    with freeze_time(tick=True) as frozen:
        assert harness.tick()["stopped"] == "paused"
        _control(harness, '{"paused": false}')
        assert harness.tick(cold=False)["stopped"] == "paused"
        advance(frozen, CONTROL_MAX_AGE_SECONDS + 1)
        assert harness.tick(cold=False)["started"] == 1


def test_control_denied_read_is_a_configuration_error(harness: Harness) -> None:
    """AccessDenied on GetParameter stops the tick loudly (the deployment is wrong)."""
    harness.configure(5)
    harness.fail("ssm.GetParameter", "AccessDeniedException", "not authorized")
    harness.send("{}")
    with pytest.raises(ConfigurationError, match="GetParameter"):
        harness.tick()
    assert harness.queue_counts() == (1, 0)


def test_control_throttled_read_starts_nothing(harness: Harness) -> None:
    """SSM still throttling after retries: whether paused is unknown, so nothing starts."""
    harness.configure(5)
    harness.fail("ssm.GetParameter", "ThrottlingException", "Rate exceeded", status=400)
    harness.send("{}")
    result = harness.tick()
    assert (result["started"], result["stopped"]) == (0, "throttled")
    assert harness.queue_counts() == (1, 0)
