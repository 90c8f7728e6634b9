"""The environment model: names are the public contract, errors name the variable."""

from __future__ import annotations

import pytest

from dispatcher.core.errors import ConfigurationError
from dispatcher.settings import load_settings

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The contract's five variables set."""
    monkeypatch.setenv("QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo")
    monkeypatch.setenv("DEAD_LETTER_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/dlq.fifo")
    monkeypatch.setenv("STATE_MACHINE_ARN", ARN)
    monkeypatch.setenv("MAX_CONCURRENCY", "5")
    monkeypatch.setenv("STATE_TABLE", "dispatcher-state")
    return monkeypatch


def test_load_settings_reads_the_contract_variables(environment: pytest.MonkeyPatch) -> None:
    """Every contract variable lands in its field, with defaults for the tunables."""
    settings = load_settings()
    assert settings.state_machine_arn == ARN
    assert settings.max_concurrency == 5
    assert settings.state_table == "dispatcher-state"
    assert settings.receive_wait_seconds == 1


def test_load_settings_zero_max_is_valid(environment: pytest.MonkeyPatch) -> None:
    """MAX_CONCURRENCY=0 is a valid setting: it pauses."""
    environment.setenv("MAX_CONCURRENCY", "0")
    assert load_settings().max_concurrency == 0


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MAX_CONCURRENCY", "-1"),
        ("MAX_CONCURRENCY", "five"),
        ("MAX_CONCURRENCY", "2.5"),
        ("STATE_MACHINE_ARN", "arn:aws:lambda:us-east-1:123456789012:function:nope"),
        ("QUEUE_URL", ""),
        ("RECEIVE_WAIT_SECONDS", "21"),
    ],
)
def test_load_settings_bad_value_names_the_variable(
    environment: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    """A malformed variable stops the tick with an error that names it."""
    environment.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=variable):
        load_settings()


@pytest.mark.parametrize(
    "variable", ["QUEUE_URL", "DEAD_LETTER_QUEUE_URL", "STATE_MACHINE_ARN", "MAX_CONCURRENCY", "STATE_TABLE"]
)
def test_load_settings_missing_variable_names_it(environment: pytest.MonkeyPatch, variable: str) -> None:
    """A missing contract variable is named in the error."""
    environment.delenv(variable)
    with pytest.raises(ConfigurationError, match=variable):
        load_settings()
