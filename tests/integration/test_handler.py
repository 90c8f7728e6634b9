"""The Lambda handler: every sample event, any event shape, metrics and logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from dispatcher import handler
from dispatcher.core.errors import ConfigurationError
from dispatcher.in_process import LocalContext
from dispatcher.telemetry import logger
from tests.support.moto_harness import Harness

EVENTS = sorted((Path(__file__).parents[2] / "events").glob("*.json"))


def test_events_folder_has_the_documented_samples() -> None:
    """events/ holds an EventBridge Scheduled Event and a Scheduler payload."""
    assert {path.name for path in EVENTS} >= {"scheduled-event.json", "scheduler-payload.json"}


@pytest.mark.parametrize("path", EVENTS, ids=[path.name for path in EVENTS])
def test_handler_runs_one_tick_for_every_sample_event(harness: Harness, path: Path) -> None:
    """Each file in events/ (the ones `sam local invoke -e` takes) runs a full tick."""
    harness.send('{"job": 1}')
    result = harness.tick(json.loads(path.read_text()))
    assert result["started"] == 1
    assert result["dead_lettered"] == 0
    assert result["running"] == 0


@pytest.mark.parametrize(
    "event",
    [
        {"detail-type": "Step Functions Execution Status Change", "source": "aws.states", "detail": {}},
        {"unexpected": {"nested": [1, 2]}},
        [],
        "a string",
        None,
        42,
    ],
    ids=["status-change", "unknown-object", "list", "string", "null", "number"],
)
def test_handler_unknown_event_shapes_still_tick_safely(harness: Harness, event: Any) -> None:
    """An event of any shape is one safe tick, never a crash."""
    harness.send('{"job": 1}')
    result = handler.lambda_handler(event, LocalContext())
    assert result["started"] == 1


def test_handler_emits_emf_metrics(harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    """Each tick prints one CloudWatch EMF document with the tick's figures."""
    harness.send('{"job": 1}')
    harness.send("not json", group="other")
    harness.tick()
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [document] = documents
    names = {metric["Name"] for metric in document["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"Running", "FreeSlots", "Started", "DeadLettered", "Released"} <= names
    assert document["Started"] == [1.0]
    assert document["DeadLettered"] == [1.0]
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Dispatcher"


def test_handler_logs_no_message_body_at_info(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """Structured JSON logs at INFO name executions and message ids, never bodies."""
    harness.send('{"secret": "s3cr3t-payload"}')
    with caplog.at_level(logging.INFO, logger="dispatcher"):
        harness.tick()
    formatter = logger.registered_formatter
    logs = [json.loads(formatter.format(record)) for record in caplog.records]
    assert not any("s3cr3t-payload" in json.dumps(log) for log in logs)
    assert any(log["message"] == "started" and "execution" in log for log in logs)


def test_handler_configuration_error_is_logged_and_counted(
    harness: Harness, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A configuration error raises, logs the problem and emits a ConfigurationErrors metric."""
    harness.monkeypatch.setenv("MAX_CONCURRENCY", "-3")
    with pytest.raises(ConfigurationError, match="MAX_CONCURRENCY"):
        harness.tick()
    assert '"ConfigurationErrors":[1.0]' in capsys.readouterr().out
    [logged] = [record for record in caplog.records if "configuration error" in record.getMessage()]
    assert logged.levelname == "ERROR"
    assert "MAX_CONCURRENCY" in logged.error  # type: ignore[attr-defined]
    assert logged.exc_info is None, "one line that names the problem, no traceback"
