"""The dispatcher's own AWS bill per million executions, from a run of the in-memory AWS (prices.py)."""

from __future__ import annotations

import json
from typing import Any

SQS_OPERATIONS = ("ReceiveMessage", "DeleteMessageBatch", "ChangeMessageVisibilityBatch", "SendMessage")
PLATFORM_LOG_BYTES = 330
"""Lambda's own START, END and REPORT lines per invocation (an estimate: their text, with a trace id)."""


def emf_bytes() -> tuple[int, int]:
    """The size of the metrics one invocation logs (Powertools' EMF line): a busy one, and one that ticked."""
    from benchmarks.full_scale import MAX_CONCURRENCY  # noqa: PLC0415 — it reports with this bill
    from dispatcher import handler  # noqa: PLC0415 — Powertools reads the environment at import
    from dispatcher.core.topology import DEFAULT, Lane, Pool, Topology  # noqa: PLC0415
    from dispatcher.tick.report import StopReason, TickReport  # noqa: PLC0415

    lane = Lane(
        DEFAULT, DEFAULT, "jobs.fifo", "dead-letters.fifo", "arn:aws:states:us-east-1:1:stateMachine:jobs"
    )
    topology = Topology(pools=(Pool(DEFAULT, MAX_CONCURRENCY),), members=(lane,))
    sizes = []
    for report in (
        TickReport(stopped=StopReason.BUSY),
        TickReport(stopped=StopReason.CAPACITY, running=MAX_CONCURRENCY, oldest_running_seconds=14.9),
    ):
        handler.emit_report(report, topology)  # the handler's own metrics
        sizes.append(len(json.dumps(handler.metrics.serialize_metric_set())) + 1)
        handler.metrics.clear_metrics()
    return sizes[0], sizes[1]


def bill(result: dict[str, Any]) -> list[tuple[str, float]]:
    """The dispatcher's own AWS bill per million executions, line by line (prices: benchmarks/prices.py)."""
    from benchmarks import prices  # noqa: PLC0415

    busy_emf, tick_emf = emf_bytes()
    invocations, busy = result["invocations"], result["busy"]
    log_bytes = (
        result["log_bytes"]
        + busy * busy_emf
        + (invocations - busy) * tick_emf
        + invocations * PLATFORM_LOG_BYTES
    )
    calls, units = result["calls"], result["units"]
    per_start = prices.PER_MILLION / max(1, result["starts"])
    return [
        ("Lambda requests", invocations * per_start * prices.LAMBDA_REQUEST),
        (
            "Lambda duration (256 MB, Arm; waiting time)",
            result["gb_seconds"] * per_start * prices.LAMBDA_ARM_GB_SECOND,
        ),
        (
            "SQS FIFO requests",
            sum(calls.get(op, 0) for op in SQS_OPERATIONS) * per_start * prices.SQS_FIFO_REQUEST,
        ),
        (
            "SQS standard requests (the end-event queue)",
            sum(result["end_queue_requests"].values()) * per_start * prices.SQS_STANDARD_REQUEST,
        ),
        ("DynamoDB write units", units.get("WriteRequestUnits", 0) * per_start * prices.DYNAMODB_WRITE_UNIT),
        ("DynamoDB read units", units.get("ReadRequestUnits", 0) * per_start * prices.DYNAMODB_READ_UNIT),
        ("X-Ray traces (default sampling)", result["traces"] * per_start * prices.XRAY_TRACE),
        (
            "CloudWatch Logs (INFO lines, EMF, Lambda's)",
            log_bytes / 1e9 * per_start * prices.LOGS_INGESTED_GB,
        ),
        ("EventBridge Scheduler", result["schedule_invocations"] * per_start * prices.SCHEDULER_INVOCATION),
    ]


def total(result: dict[str, Any]) -> float:
    """The whole bill per million executions: the sum of `bill`'s lines."""
    return sum(cost for _, cost in bill(result))
