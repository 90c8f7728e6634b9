"""Lambda entry point: parse the event, build the service, run it, emit metrics."""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from dispatcher.adapters.cached_control import CachedControlParameter
from dispatcher.adapters.clients import Clients, function_clients, ssm_client
from dispatcher.adapters.resources import AwsResources
from dispatcher.core.control import Limits, stale_keys
from dispatcher.core.errors import ConfigurationError, TransientError
from dispatcher.core.events import EndNews, describe_trigger, end_news
from dispatcher.core.topology import Topology
from dispatcher.settings import Settings, load_settings
from dispatcher.telemetry import capture_lambda_handler, emit_per, logger, metrics
from dispatcher.tick.invocation import dispatcher_for, steered
from dispatcher.tick.ports import Runtime
from dispatcher.tick.report import Counts, StopReason, TickReport
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


def reset_clients() -> None:
    """Forget cached clients, parameter reads and warm reads, as a cold start would (a testing hook)."""
    _clients.cache_clear()
    _control.cache_clear()
    _warm.forget()


def read_limits(settings: Settings, configured: Topology) -> tuple[Limits, Topology]:
    """MAX and pause for this tick, of pool ``default`` and of every pool and lane (`steered`).

    A stale key of the control parameter (its member is gone from ``LANES``) is named in a warning.
    """
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
    return steered(settings, control, configured)


def build_dispatcher(
    settings: Settings,
    topology: Topology,
    context: LambdaContext,
    configured: Topology | None = None,
) -> Dispatcher:
    """Wire the service to AWS for one invocation (``configured``: ``LANES`` before the control parameter)."""
    resources = AwsResources(_clients(), settings.state_table, wait_seconds=settings.receive_wait_seconds)
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


def _emit(report: TickReport, limits: Limits) -> None:
    if report.stopped is StopReason.BUSY:
        # Another tick holds the lease and reports for both: two figures of one minute
        # would halve the dashboard's RUNNING and MAX.
        metrics.add_metric(name="BusyTicks", unit=MetricUnit.Count, value=1)
        return
    metrics.add_metric(name="MaxConcurrency", unit=MetricUnit.Count, value=limits.max_concurrency)
    metrics.add_metric(name="Paused", unit=MetricUnit.Count, value=int(limits.halted))
    throttled = report.stopped is StopReason.THROTTLED
    metrics.add_metric(name="ThrottledTicks", unit=MetricUnit.Count, value=int(throttled))
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
    if report.laned:
        # With lanes, each lane's and each pool's own figures too, under a Lane or Pool dimension.
        for lane, counts in report.lanes.items():
            emit_per(
                "Lane",
                lane,
                {
                    "Started": counts.started,
                    "DeadLettered": counts.dead_lettered,
                    "Released": counts.released,
                },
            )
        for pool, figures in report.pools.items():
            emit_per(
                "Pool",
                pool,
                {
                    "Running": figures.running,
                    "FreeSlots": figures.free,
                    "MaxConcurrency": figures.max_concurrency,
                },
            )
    if report.gates:
        _emit_gates(report)
    if report.tenants is not None:
        metrics.add_metric(name="HeldJobs", unit=MetricUnit.Count, value=report.tenants.held)
        metrics.add_metric(name="GroupsAtLimit", unit=MetricUnit.Count, value=report.tenants.groups_at_limit)
        if report.tenants.largest_group_share is not None:
            metrics.add_metric(
                name="LargestGroupShare",
                unit=MetricUnit.Percent,
                value=100 * report.tenants.largest_group_share,
            )


def _emit_gates(report: TickReport) -> None:
    """Each gate's figures under a Gate dimension, and the longest anyone has been inside (the alarm's)."""
    metrics.add_metric(name="Admitted", unit=MetricUnit.Count, value=report.admitted)
    metrics.add_metric(name="TokensRefused", unit=MetricUnit.Count, value=report.refused)
    ages = [figures.oldest_inside_seconds for figures in report.inside.values()]
    oldest = max((age for age in ages if age is not None), default=0.0)
    metrics.add_metric(name="OldestInsideAge", unit=MetricUnit.Seconds, value=oldest)
    for gate, counts in report.gates.items():
        figures = report.inside.get(gate)
        emit_per(
            "Gate",
            gate,
            {
                "Admitted": counts.admitted,
                "TokensRefused": counts.refused,
                "DeadLettered": counts.dead_lettered,
                **({} if figures is None else {"Inside": figures.inside}),
            },
        )


def _log_skipped(news: EndNews) -> None:
    """Name each record of a batch that reports no end; it never fails the batch."""
    for record in news.skipped:
        logger.warning(
            "skipped a record that is not an end of this state machine",
            extra={"message_id": record.message_id, "reason": record.reason},
        )
    if news.records is not None:
        metrics.add_metric(name="EndEvents", unit=MetricUnit.Count, value=len(news.ended))
        metrics.add_metric(name="SkippedEventRecords", unit=MetricUnit.Count, value=len(news.skipped))


@logger.inject_lambda_context(log_event=False, clear_state=True)
@capture_lambda_handler
@metrics.log_metrics(raise_on_empty_metrics=False)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    """Run one tick, whatever invoked it (schedule, Scheduler, manual, a status change, a batch of them)."""
    logger.info("tick", extra={"trigger": describe_trigger(event)})
    try:
        settings = load_settings()
        configured = settings.topology()  # a malformed LANES stops the tick before any queue is read
        news = end_news(event, configured.watched_machines, time.time())
        _log_skipped(news)
        try:
            limits, topology = read_limits(settings, configured)
        except TransientError as error:
            # Whether the operator paused is unknown: start nothing, the next tick reads again.
            logger.warning("could not read the control parameter", extra={"reason": str(error)})
            metrics.add_metric(name="ThrottledTicks", unit=MetricUnit.Count, value=1)
            gates = {gate.name: Counts() for gate in configured.gates}
            return TickReport(stopped=StopReason.THROTTLED, gates=gates).as_dict()
        report = build_dispatcher(settings, topology, context, configured).run(news.ended, news.releases)
    except ConfigurationError as error:
        # Raised on purpose: Lambda records an error (with its stack), and this metric can alarm.
        # The log line says what is wrong in a line: a traceback would add nothing the message lacks.
        metrics.add_metric(name="ConfigurationErrors", unit=MetricUnit.Count, value=1)
        logger.error(
            "configuration error: the tick stopped and every message stays queued",
            extra={"error": str(error)},
        )
        raise
    _emit(report, limits)
    logger.info(
        "tick done", extra={**report.as_dict(), "max": limits.max_concurrency, "max_from": limits.source}
    )
    return report.as_dict()
