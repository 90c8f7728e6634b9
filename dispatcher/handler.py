"""Lambda entry point: parse the event, build the service, run one tick, emit metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.config import Config

from dispatcher.adapters.dynamodb import StateTable, TickLease
from dispatcher.adapters.sqs import DeadLetterQueue, SourceQueue
from dispatcher.adapters.ssm import ControlParameter
from dispatcher.adapters.stepfunctions import StateMachine
from dispatcher.control import Limits, combine
from dispatcher.errors import ConfigurationError, TransientError
from dispatcher.planning import describe_trigger, ended_execution
from dispatcher.service import Dispatcher, TickPolicy, TickReport
from dispatcher.settings import MAX_START_CONCURRENCY, Settings, load_settings
from dispatcher.telemetry import capture_lambda_handler, logger, metrics
from dispatcher.warm import WarmState

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_ssm import SSMClient
    from mypy_boto3_stepfunctions import SFNClient


# botocore's standard retry mode backs off on throttling and 5xx; what is still
# failing after these attempts is back-pressure for the tick, not a reason to loop.
# The read timeout leaves room for a 20 s long poll; the pool holds a connection per
# concurrent start, recording batch or delete batch.
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 4},
    connect_timeout=3,
    read_timeout=25,
    user_agent_extra="dispatcher",
    max_pool_connections=MAX_START_CONCURRENCY + 4,
)
# StartExecution is the one call made at a high rate from many threads, so it gets its
# own client and one more attempt. Measured against a token bucket of AWS's shape
# (`make bench`), standard mode sustains the refill rate better than adaptive mode:
# when the pool's threads are throttled together, each throttle cuts adaptive mode's
# client-side rate again, and it spends seconds far below the refill rate.
START_ATTEMPTS = 5
START_CLIENT_CONFIG = CLIENT_CONFIG.merge(
    Config(retries={"mode": "standard", "max_attempts": START_ATTEMPTS})
)


@dataclass(frozen=True)
class Clients:
    """The boto3 clients one container uses (thread-safe, shared by the start pool)."""

    stepfunctions: SFNClient
    starts: SFNClient
    sqs: SQSClient
    dynamodb: DynamoDBClient


@cache
def _clients() -> Clients:
    # Built on first use, never at import: tests (and moto) start before clients
    # exist, and AWS_ENDPOINT_URL is honoured by boto3 itself.
    return Clients(
        stepfunctions=boto3.client("stepfunctions", config=CLIENT_CONFIG),
        starts=boto3.client("stepfunctions", config=START_CLIENT_CONFIG),
        sqs=boto3.client("sqs", config=CLIENT_CONFIG),
        dynamodb=boto3.client("dynamodb", config=CLIENT_CONFIG),
    )


_warm = WarmState()


@cache
def _control(name: str) -> ControlParameter:
    # One per container, so Powertools' cache of the value lives across invocations; its
    # client is only built (a cold-start cost) when a control parameter is configured.
    ssm: SSMClient = boto3.client("ssm", config=CLIENT_CONFIG)
    return ControlParameter(name, client=ssm)


def reset_clients() -> None:
    """Forget cached clients, parameter reads and warm reads, as a cold start would (a testing hook)."""
    _clients.cache_clear()
    _control.cache_clear()
    _warm.forget()


def read_limits(settings: Settings) -> Limits:
    """MAX and pause for this tick: the control parameter's keys where set, else the environment."""
    name = settings.control_parameter
    control = None if name is None else _control(name).read()
    return combine(settings.max_concurrency, control, name)


def build_dispatcher(settings: Settings, limits: Limits, context: LambdaContext) -> Dispatcher:
    """Wire the service to AWS for one invocation."""
    clients = _clients()
    return Dispatcher(
        policy=TickPolicy(
            max_concurrency=limits.max_concurrency,
            paused=limits.paused,
            time_margin_seconds=settings.time_margin_seconds,
            start_concurrency=settings.start_concurrency,
            list_reuse_seconds=settings.list_reuse_seconds,
            loop_seconds=settings.loop_seconds,
        ),
        state_machine=StateMachine(
            clients.stepfunctions, settings.state_machine_arn, start_client=clients.starts
        ),
        queue=SourceQueue(clients.sqs, settings.queue_url, wait_seconds=settings.receive_wait_seconds),
        dead_letter_queue=DeadLetterQueue(clients.sqs, settings.dead_letter_queue_url),
        state_table=StateTable(clients.dynamodb, settings.state_table, settings.state_machine_arn),
        lease=TickLease(clients.dynamodb, settings.state_table, settings.state_machine_arn),
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000,
        clock=time.time,
        sleep=time.sleep,
        warm=_warm,
    )


def _emit(report: TickReport, limits: Limits) -> None:
    if report.stopped == "busy":
        # Another tick holds the lease and reports for both: two figures of one minute
        # would halve the dashboard's RUNNING and MAX.
        metrics.add_metric(name="BusyTicks", unit=MetricUnit.Count, value=1)
        return
    metrics.add_metric(name="MaxConcurrency", unit=MetricUnit.Count, value=limits.max_concurrency)
    metrics.add_metric(name="Paused", unit=MetricUnit.Count, value=int(limits.halted))
    metrics.add_metric(name="ThrottledTicks", unit=MetricUnit.Count, value=int(report.stopped == "throttled"))
    if report.oldest_running_seconds is not None:
        metrics.add_metric(
            name="OldestRunningAge", unit=MetricUnit.Seconds, value=report.oldest_running_seconds
        )
    metrics.add_metric(name="Running", unit=MetricUnit.Count, value=report.running)
    metrics.add_metric(name="FreeSlots", unit=MetricUnit.Count, value=report.free)
    metrics.add_metric(name="Started", unit=MetricUnit.Count, value=report.started)
    metrics.add_metric(name="Redriven", unit=MetricUnit.Count, value=report.redriven)
    metrics.add_metric(name="AlreadyStarted", unit=MetricUnit.Count, value=report.already_started)
    metrics.add_metric(name="DeadLettered", unit=MetricUnit.Count, value=report.dead_lettered)
    metrics.add_metric(name="Released", unit=MetricUnit.Count, value=report.released)
    metrics.add_metric(name="DeleteFailures", unit=MetricUnit.Count, value=report.delete_failures)


@logger.inject_lambda_context(log_event=False, clear_state=True)
@capture_lambda_handler
@metrics.log_metrics(raise_on_empty_metrics=False)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    """Run one tick, whatever invoked it (schedule, Scheduler, manual, status change)."""
    logger.info("tick", extra={"trigger": describe_trigger(event)})
    try:
        settings = load_settings()
        ended = ended_execution(event, settings.state_machine_arn)
        try:
            limits = read_limits(settings)
        except TransientError as error:
            # Whether the operator paused is unknown: start nothing, the next tick reads again.
            logger.warning("could not read the control parameter", extra={"reason": str(error)})
            metrics.add_metric(name="ThrottledTicks", unit=MetricUnit.Count, value=1)
            return TickReport(stopped="throttled").as_dict()
        report = build_dispatcher(settings, limits, context).run(ended)
    except ConfigurationError:
        # Raised on purpose: Lambda records an error, and this metric can alarm.
        metrics.add_metric(name="ConfigurationErrors", unit=MetricUnit.Count, value=1)
        logger.exception("configuration error: the tick stopped and every message stays queued")
        raise
    _emit(report, limits)
    logger.info(
        "tick done", extra={**report.as_dict(), "max": limits.max_concurrency, "max_from": limits.source}
    )
    return report.as_dict()
