"""The Powertools Logger, Metrics and Tracer shared by the handler and the service."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE_NAME = os.getenv("POWERTOOLS_SERVICE_NAME", "dispatcher")

logger = Logger(service=SERVICE_NAME)
metrics = Metrics(namespace=os.getenv("POWERTOOLS_METRICS_NAMESPACE", "Dispatcher"), service=SERVICE_NAME)
tracer = Tracer(service=SERVICE_NAME)
