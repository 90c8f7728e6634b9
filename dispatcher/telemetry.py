"""The Powertools Logger, Metrics and Tracer shared by the handler and the service.

Logger and Metrics are built at import: they only read the environment. The Tracer
is built on the first traced invocation, and only when tracing is on: constructing it
imports the X-Ray SDK, whose recorder creates two X-Ray botocore clients when it is
not inside Lambda (about 150 ms here), so a test, the demo or a CLI that imports the
handler would pay for tracing it never does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache, wraps
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

SERVICE_NAME = os.getenv("POWERTOOLS_SERVICE_NAME", "dispatcher")
TRUTHY = frozenset({"1", "true", "yes", "on", "y", "t"})

NAMESPACE = os.getenv("POWERTOOLS_METRICS_NAMESPACE", "Dispatcher")

logger = Logger(service=SERVICE_NAME)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE_NAME)


def emit_per(
    dimension: str, value: str, figures: dict[str, float], unit: MetricUnit = MetricUnit.Count
) -> None:
    """One EMF document of ``figures`` for one lane or pool (``dimension`` "Lane" or "Pool").

    Powertools' `single_metric` prints whatever the environment says; `Metrics` would not
    when metrics are disabled (a local tick, a test), so neither does this.
    """
    if is_metrics_disabled():
        return
    for name, figure in figures.items():
        with single_metric(
            name=name,
            unit=unit,
            value=figure,
            namespace=NAMESPACE,
            default_dimensions={"service": SERVICE_NAME},
        ) as metric:
            metric.add_dimension(name=dimension, value=value)


Handler = TypeVar("Handler", bound=Callable[..., Any])


def tracing_enabled() -> bool:
    """Powertools' own rule: in Lambda, not under `sam local`, and not POWERTOOLS_TRACE_DISABLED."""
    if os.getenv("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in TRUTHY:
        return False
    return bool(os.getenv("LAMBDA_TASK_ROOT")) and not os.getenv("AWS_SAM_LOCAL")


@cache
def tracer() -> Tracer:
    """The Powertools Tracer, built once, on first use (it patches botocore for X-Ray)."""
    return Tracer(service=SERVICE_NAME)


def capture_lambda_handler(handler: Handler) -> Handler:
    """`Tracer.capture_lambda_handler`, with the Tracer built on the first traced call."""

    @wraps(handler)
    def traced(event: Any, context: Any) -> Any:
        if not tracing_enabled():
            return handler(event, context)
        return _traced(handler)(event, context)

    return traced  # type: ignore[return-value]


@cache
def _traced(handler: Callable[..., Any]) -> Callable[..., Any]:
    return tracer().capture_lambda_handler(handler, capture_response=False)
