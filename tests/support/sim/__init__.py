"""An in-memory AWS at the tick's ports, in virtual time: test and benchmark code, never shipped.

It behaves as AWS does where the tick relies on it: FIFO groups, in-flight hiding and the
visibility timeout (`sqs`); `ListExecutions` lag both ways, `DescribeExecution` lag, name
idempotency and `RedriveExecution` (`stepfunctions`, over the fault harness's `World`);
status change events lost, doubled or late; token buckets with AWS's quotas per API, a
latency per call and botocore's standard retries (`api`); the state table's items, units
and lease (`dynamodb`); and the function's containers and invocations (`function`). It is a
model, and models drift: a test runs one workload on moto and here and compares the calls.
"""
