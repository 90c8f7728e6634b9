"""The control parameter's value, parsed and combined with the environment, without AWS."""

from __future__ import annotations

import pytest

from dispatcher.core.control import Control, combine, parse_control
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.messages import group_problem, job_problem


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


def test_combine_without_a_parameter_is_the_environment() -> None:
    """No parameter (or none configured): MAX from the environment, not paused."""
    limits = combine(5, None, "/p")
    assert (limits.max_concurrency, limits.paused, limits.source, limits.halted) == (
        5,
        False,
        "environment",
        False,
    )


def test_combine_parameter_keys_override_only_what_they_set() -> None:
    """A pause alone keeps the environment's MAX; a MAX alone is not a pause."""
    paused = combine(5, Control(paused=True), "/p")
    assert (paused.max_concurrency, paused.halted, paused.source) == (5, True, "environment")
    limited = combine(5, Control(max_concurrency=9), "/p")
    assert (limited.max_concurrency, limited.halted, limited.source) == (9, False, "/p")


def test_combine_max_zero_halts_without_a_pause_flag() -> None:
    """MAX 0 from the parameter halts the dispatcher like a pause."""
    assert combine(5, Control(max_concurrency=0), "/p").halted


def test_control_as_json_writes_only_the_keys_set() -> None:
    """What `set-max` writes on a fresh parameter is only its own key."""
    assert Control(max_concurrency=3).as_json() == '{"max_concurrency": 3}'


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
