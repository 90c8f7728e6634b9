"""AWS's quotas on the calls the dispatcher makes: per account and region, shared with everything else there.

Step Functions throttles each API with a token bucket (its size is the burst, its refill
the sustained rate), and the bucket is larger in us-east-1, us-west-2 and eu-west-1 than
elsewhere (the Step Functions developer guide, "Quotas related to API action
throttling" and "Other quotas"). SQS holds a FIFO queue to 300 calls a second per API
action without high-throughput mode; DynamoDB holds one partition key to 1,000 write and
3,000 read units a second; SSM's standard throughput is 40 `GetParameter` calls a second.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bucket:
    """A token bucket: ``size`` calls at once, refilled at ``refill`` a second."""

    size: float
    refill: float


LARGE_REGIONS = frozenset({"us-east-1", "us-west-2", "eu-west-1"})
"""Where Step Functions' buckets are larger."""

STEP_FUNCTIONS_LARGE_REGIONS = {
    "StartExecution": Bucket(1300, 300),
    "RedriveExecution": Bucket(1300, 300),
    "ListExecutions": Bucket(200, 5),
    "DescribeExecution": Bucket(300, 15),
    "DescribeStateMachine": Bucket(200, 20),
    "StopExecution": Bucket(1000, 200),
    "SendTaskSuccess": Bucket(3000, 500),
}
STEP_FUNCTIONS_OTHER_REGIONS = {
    "StartExecution": Bucket(800, 150),
    "RedriveExecution": Bucket(800, 150),
    "ListExecutions": Bucket(100, 2),
    "DescribeExecution": Bucket(250, 10),
    "DescribeStateMachine": Bucket(200, 20),
    "StopExecution": Bucket(500, 25),
    "SendTaskSuccess": Bucket(1500, 300),
}
SQS_FIFO_CALLS_PER_ACTION = Bucket(300, 300)
"""A FIFO queue's calls per second of each action (SendMessage, ReceiveMessage, DeleteMessage, ...)."""
SQS_FIFO_HIGH_THROUGHPUT_CALLS_PER_ACTION = Bucket(3000, 3000)
"""The same in high throughput mode (the template's gate queue), at its lowest (the regions it
is smallest in): a gate's workflows send one request each, hundreds a second."""
DYNAMODB_PARTITION_WRITES = Bucket(1000, 1000)
"""Write request units per second on one partition key (on-demand or provisioned)."""
DYNAMODB_PARTITION_READS = Bucket(3000, 3000)
"""Read request units per second on one partition key (a strongly consistent read: one per 4 KB)."""
SSM_GET_PARAMETER = Bucket(40, 40)
"""GetParameter calls per second at the standard throughput."""


def step_functions(region: str) -> dict[str, Bucket]:
    """Step Functions' buckets in ``region``."""
    return dict(STEP_FUNCTIONS_LARGE_REGIONS if region in LARGE_REGIONS else STEP_FUNCTIONS_OTHER_REGIONS)
