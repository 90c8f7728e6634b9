"""AWS list prices (us-east-1, on-demand, no free tier) for the dispatcher's own bill per million executions.

Named here so the figures can be checked against the pricing pages they come from.
"""

from __future__ import annotations

PER_MILLION = 1_000_000

LAMBDA_REQUEST = 0.20 / PER_MILLION
"""AWS Lambda: $0.20 per 1M requests."""
LAMBDA_ARM_GB_SECOND = 0.0000133334
"""AWS Lambda, Arm: $0.0000133334 per GB-second (first tier)."""
SQS_FIFO_REQUEST = 0.50 / PER_MILLION
"""Amazon SQS FIFO: $0.50 per 1M requests (each 64 KB of a request's payload is one)."""
SQS_STANDARD_REQUEST = 0.40 / PER_MILLION
"""Amazon SQS standard: $0.40 per 1M requests (the end-event queue; EventBridge's delivery of
AWS service events from the default bus is free)."""
DYNAMODB_WRITE_UNIT = 0.625 / PER_MILLION
"""Amazon DynamoDB on-demand: $0.625 per 1M write request units."""
DYNAMODB_READ_UNIT = 0.125 / PER_MILLION
"""Amazon DynamoDB on-demand: $0.125 per 1M read request units (a strongly consistent 4 KB read is one)."""
XRAY_TRACE = 5.00 / PER_MILLION
"""AWS X-Ray: $5.00 per 1M traces recorded (the function has Tracing: Active)."""
LOGS_INGESTED_GB = 0.50
"""Amazon CloudWatch Logs: $0.50 per GB ingested (Standard)."""
SCHEDULER_INVOCATION = 1.00 / PER_MILLION
"""Amazon EventBridge Scheduler: $1.00 per 1M invocations."""
STEP_FUNCTIONS_TRANSITION = 0.025 / 1000
"""AWS Step Functions, STANDARD: $0.025 per 1,000 state transitions (API calls such as
StartExecution, ListExecutions and DescribeExecution are not charged)."""
XRAY_SAMPLING = (1.0, 0.05)
"""X-Ray's default sampling rule: the first request each second, then 5 % of the rest."""
