"""Lambda entry point: parse the event, build the service, run one tick, emit metrics."""

from __future__ import annotations

import time
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from dispatcher.adapters.dynamodb import RecentStarts
from dispatcher.adapters.sqs import DeadLetterQueue, SourceQueue
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.errors import ConfigurationError
from dispatcher.planning import describe_trigger
from dispatcher.service import Dispatcher, TickReport
from dispatcher.settings import Settings, load_settings
from dispatcher.telemetry import logger, metrics, tracer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_stepfunctions import SFNClient


# botocore's standard retry mode backs off on throttling and 5xx; what is still
# failing after these attempts is back-pressure for the tick, not a reason to loop.
# The read timeout leaves room for a 20 s long poll.
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=3,
    read_timeout=25,
    user_agent_extra="dispatcher",
)


@cache
def _clients() -> tuple[SFNClient, SQSClient, DynamoDBClient]:
    # Built on first use, never at import: tests (and moto) start before clients
    # exist, and AWS_ENDPOINT_URL is honoured by boto3 itself.
    return (
        boto3.client("stepfunctions", config=CLIENT_CONFIG),
        boto3.client("sqs", config=CLIENT_CONFIG),
        boto3.client("dynamodb", config=CLIENT_CONFIG),
    )


def reset_clients() -> None:
    """Forget cached clients, as a cold start would (a testing hook)."""
    _clients.cache_clear()


def build_dispatcher(settings: Settings, context: LambdaContext) -> Dispatcher:
    """Wire the service to AWS for one invocation."""
    stepfunctions, sqs, dynamodb = _clients()
    return Dispatcher(
        max_concurrency=settings.max_concurrency,
        state_machine=StateMachine(stepfunctions, settings.state_machine_arn),
        queue=SourceQueue(sqs, settings.queue_url, wait_seconds=settings.receive_wait_seconds),
        dead_letter_queue=DeadLetterQueue(sqs, settings.dead_letter_queue_url),
        recent_starts=RecentStarts(dynamodb, settings.state_table, settings.state_machine_arn),
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000,
        time_margin_seconds=settings.time_margin_seconds,
        clock=time.time,
    )


def _emit(report: TickReport, max_concurrency: int) -> None:
    metrics.add_metric(name="MaxConcurrency", unit=MetricUnit.Count, value=max_concurrency)
    metrics.add_metric(name="Running", unit=MetricUnit.Count, value=report.running)
    metrics.add_metric(name="FreeSlots", unit=MetricUnit.Count, value=report.free)
    metrics.add_metric(name="Started", unit=MetricUnit.Count, value=report.started)
    metrics.add_metric(name="AlreadyStarted", unit=MetricUnit.Count, value=report.already_started)
    metrics.add_metric(name="DeadLettered", unit=MetricUnit.Count, value=report.dead_lettered)
    metrics.add_metric(name="Released", unit=MetricUnit.Count, value=report.released)
    metrics.add_metric(name="DeleteFailures", unit=MetricUnit.Count, value=report.delete_failures)


@logger.inject_lambda_context(log_event=False, clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics(raise_on_empty_metrics=False)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    """Run one tick, whatever invoked it (schedule, Scheduler, manual, status change)."""
    logger.info("tick", extra={"trigger": describe_trigger(event)})
    try:
        settings = load_settings()
        report = build_dispatcher(settings, context).tick()
    except ConfigurationError:
        # Raised on purpose: Lambda records an error, and this metric can alarm.
        metrics.add_metric(name="ConfigurationErrors", unit=MetricUnit.Count, value=1)
        logger.exception("configuration error: the tick stopped and every message stays queued")
        raise
    _emit(report, settings.max_concurrency)
    logger.info("tick done", extra=report.as_dict())
    return report.as_dict()
