"""Lambda entry point: parse the event, run the tick, emit what it did."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from functools import cache, lru_cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from dispatcher.adapters.cached_control import CachedControlParameter
from dispatcher.adapters.clients import Clients, function_clients, ssm_client
from dispatcher.adapters.resources import AwsResources
from dispatcher.core.control import Control, max_source, stale_keys
from dispatcher.core.errors import ConfigurationError, TransientError
from dispatcher.core.events import EndNews, describe_trigger, end_news, wake_deadline
from dispatcher.core.topology import Topology
from dispatcher.settings import Settings, load_settings, read_variables
from dispatcher.telemetry import capture_lambda_handler, emit_per, logger, metrics
from dispatcher.tick.figures import Figure, figures, news_figures
from dispatcher.tick.invocation import dispatcher_for, steered
from dispatcher.tick.ports import Runtime
from dispatcher.tick.report import StopReason, TickReport, stopped_report
from dispatcher.tick.service import Dispatcher
from dispatcher.tick.threads import thread_pool
from dispatcher.tick.warm import WarmState

_warm = WarmState()


@cache
def _clients() -> Clients:
    return function_clients()


@cache
def _control(name: str) -> CachedControlParameter:
    # One per container, so Powertools' cache of the value lives across invocations; its
    # client is only built (a cold-start cost) when a control parameter is configured.
    return CachedControlParameter(name, client=ssm_client())


@lru_cache(maxsize=1)
def _configured(variables: tuple[tuple[str, str], ...]) -> tuple[Settings, Topology]:
    settings = load_settings(dict(variables))
    return settings, settings.topology()  # a malformed LANES stops the tick before any queue is read


def configuration() -> tuple[Settings, Topology]:
    """The function's environment and its ``LANES``, validated once per container.

    A deployed function's environment never changes in a container; one that does (a test,
    `dispatcher local` ticking with other settings) is validated again. A configuration
    error is raised by every invocation, each naming the variable.
    """
    return _configured(read_variables(os.environ))


def reset_clients() -> None:
    """Forget clients, settings, parameter reads and warm reads, as a cold start would (a testing hook)."""
    _clients.cache_clear()
    _control.cache_clear()
    _configured.cache_clear()
    _warm.forget()


def read_control(settings: Settings, configured: Topology) -> Control | None:
    """The control parameter's value (None: none configured, or none written); its stale keys named."""
    name = settings.control_parameter
    control = None if name is None else _control(name).read()
    stale = stale_keys(configured, control)
    if stale:
        # A member removed from LANES while the parameter still steered it: never a reason to stop.
        logger.warning(
            "stale control keys ignored: they name no configured pool, lane or gate",
            extra={
                "stale_keys": list(stale),
                "parameter": name,
                "fix": "dispatcher forget --pool/--lane/--gate NAME",
            },
        )
    return control


def build_dispatcher(
    settings: Settings,
    topology: Topology,
    context: LambdaContext,
    configured: Topology | None = None,
) -> Dispatcher:
    """Wire the service to AWS for one invocation (``configured``: ``LANES`` before the control parameter)."""
    resources = AwsResources(
        _clients(), settings.state_table, wait_seconds=settings.receive_wait_seconds, kept=_warm.rosters
    )
    runtime = Runtime(
        clock=time.time,
        sleep=time.sleep,
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000,
        pool=thread_pool,
    )
    name = settings.control_parameter
    return dispatcher_for(
        settings,
        topology=topology,
        resources=resources,
        runtime=runtime,
        warm=_warm,
        control=None if name is None else (lambda: _control(name).read()),
        configured=configured,
    )


def emit(found: Iterable[Figure]) -> None:
    """Totals into the invocation's EMF document; a lane's, pool's or gate's into one of its own."""
    for figure in found:
        unit = MetricUnit[figure.unit]
        if figure.dimension is None:
            metrics.add_metric(name=figure.name, unit=unit, value=figure.value)
        else:
            emit_per(*figure.dimension, {figure.name: figure.value}, unit)


def emit_report(report: TickReport, topology: Topology) -> None:
    """The tick's metrics: totals, and each lane's, pool's and gate's under its dimension."""
    emit(figures(report, topology))


def _log_news(news: EndNews) -> None:
    """Say what woke the tick; name each record of a batch that reports no end (it never fails the batch)."""
    if news.wakes:
        named = sorted({wake.member for wake in news.wakes if wake.member is not None})
        logger.info("woken: a producer queued jobs", extra={"wakes": len(news.wakes), "members": named})
    for record in news.skipped:
        logger.warning(
            "skipped a record that is not an end of this state machine",
            extra={"message_id": record.message_id, "reason": record.reason},
        )
    emit(news_figures(news))


@logger.inject_lambda_context(log_event=False, clear_state=True)
@capture_lambda_handler
@metrics.log_metrics(raise_on_empty_metrics=False)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    """Run one tick, whatever invoked it (schedule, Scheduler, manual, a status change, a batch of them)."""
    logger.info("tick", extra={"trigger": describe_trigger(event)})
    try:
        settings, configured = configuration()
        news = end_news(event, configured.watched_machines, time.time())
        _log_news(news)
        try:
            control = read_control(settings, configured)
        except TransientError as error:
            # Whether the operator paused is unknown: start nothing, the next tick reads again.
            logger.warning("could not read the control parameter", extra={"reason": str(error)})
            metrics.add_metric(name="ThrottledTicks", unit=MetricUnit.Count, value=1)
            return stopped_report(configured, StopReason.THROTTLED).as_dict()
        topology = steered(settings, control, configured)
        service = build_dispatcher(settings, topology, context, configured)
        # A wake invoking the function directly is one tick like any object: only the
        # mapping's batches carry a wake's SentTimestamp, and with it the second to cover.
        wake_until = None if news.records is None else wake_deadline(news.wakes)
        report = service.run(news.ended, news.releases, wake_until)
    except ConfigurationError as error:
        # Raised on purpose: Lambda records an error (with its stack), and this metric can alarm.
        # The log line says what is wrong in a line: a traceback would add nothing the message lacks.
        metrics.add_metric(name="ConfigurationErrors", unit=MetricUnit.Count, value=1)
        logger.error(
            "configuration error: the tick stopped and every message stays queued",
            extra={"error": str(error)},
        )
        raise
    emit_report(report, topology)
    source = max_source(control, settings.control_parameter)
    logger.info(
        "tick done",
        extra={**report.as_dict(), "max": topology.default_pool.max_concurrency, "max_from": source},
    )
    return report.as_dict()
