"""A gate at AWS's quotas, in the in-memory AWS: admissions a second, places that come back, and the bill.

Deployed as the template deploys gate ``gate`` (in pool default, its requests on a FIFO
queue in high throughput mode, releases and ends through the end-event queue's mapping,
the schedule every minute, the template's settings), on the unchanged tick service in
virtual time, with section 8's lag, latency and quotas. A producer keeps ``waiting``
executions waiting at the gate (30,000 for the throughput runs; 18,000 for the cost run,
a one-minute wait at its pace); each one's section lasts 5–15 s, its release is sent as
the section ends, and it ends a second later. A few die inside (aborted): half of those
with their status change event, half with none, so only a check with Step Functions finds
them. The executions send no wake before their request (the sample's `Wake dispatcher`):
at this pace releases and ends tick the gate many times a second, and a wake would add a
transition and an SQS request an execution for nothing. The world checks the pool's cap at
every admission; a token taken twice, or a request never admitted, is counted. Not
simulated: the tick's own CPU time, anyone else's calls.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

from benchmarks import billing, full_scale, prices
from dispatcher.core import quotas
from dispatcher.core.executions import execution_name
from tests.support.sim.aws import InMemoryAws, SimGate
from tests.support.sim.function import EventSourceMapping, Function
from tests.support.sim.gated import GatedExecutions, GatedWorkload

GATE = "gate"
MAX_CONCURRENCY = 3000
WAITING = 30_000
"""Executions waiting at the gate in the throughput runs."""
COST_WAITING = 18_000
"""In the cost run: at about 300 admissions a second, a one-minute average wait."""
SECTION = (5.0, 15.0)
JUDGED_SECONDS = 120.0
"""Deaths closer than this (the contract's bound for a lost end) to the run's end are not judged."""
DIES_INSIDE = 0.002
"""Of the executions admitted, those aborted inside their section (half of them silently)."""


def template_settings(aws: InMemoryAws) -> Any:
    """Section 8's template settings, with ``LANES`` naming the gate."""
    return full_scale.template_settings(aws).model_copy(update={"lanes": aws.lanes_document()})


def run(
    region: str,
    seconds: float = 600.0,
    waiting: int = WAITING,
    dies_inside: float = DIES_INSIDE,
    section: tuple[float, float] = SECTION,
) -> dict[str, Any]:
    """Warm up, then measure ``seconds`` of a gate of MAX 3,000 with ``waiting`` executions waiting."""
    aws = InMemoryAws(
        region=region, lag=full_scale.LAG, events=full_scale.EVENTS, seed=11, gates=[SimGate(GATE)]
    )
    aws.cap_pools(MAX_CONCURRENCY)
    began = aws.scheduler.now
    end = began + full_scale.WARM_UP_SECONDS + seconds
    function = Function(aws, template_settings(aws), mapping=EventSourceMapping())
    workload = GatedWorkload(section=section, after=1.0, dies_inside=dies_inside, silent=0.5)
    executions = GatedExecutions(aws, function, GATE, workload, random.Random(11))
    executions.keep_waiting(waiting, end)
    function.schedule(60.0, until=end)
    full_scale.progress(aws, f"section 10: {region}, {waiting:,} waiting", end)
    result = full_scale.measure(aws, function, region, seconds, end)
    measured_from = result["measured_from"]
    gates = executions.gates
    admitted = [moment for moment, _ in gates.admissions if moment >= measured_from]
    result.update(
        design="a gate",
        section=section,
        waiting=waiting,
        starts=len(admitted),
        admissions=len(admitted),
        requests=sum(entry.requested_at >= measured_from for entry in gates.entries.values()),
        taken_twice=sum(count > 1 for count in gates.accepted.values()),
        never_admitted=_never_admitted(gates, measured_from),
        waited=_waits(gates, measured_from),
        leaks=_leaks(aws, executions, measured_from),
        releases=function.releases_sent,
        partitions={
            **result["partitions"],
            "the gate's admissions": {
                kind: aws.usage.partition_units[(aws.table.inside_partition(GATE).key, kind)]
                for kind in ("WriteRequestUnits", "ReadRequestUnits")
            },
        },
    )
    return result


def _never_admitted(gates: Any, since: float) -> int:
    """Requests older than the run's last minute (one wait's worth) still waiting: none should be.

    A request older than every admitted one's is one the dispatcher skipped.
    """
    waiting = [entry.requested_at for entry in gates.entries.values() if entry.waiting]
    admitted = [entry.requested_at for entry in gates.entries.values() if entry.admitted_at is not None]
    newest = max(admitted, default=since)
    return sum(requested < newest - 1.0 for requested in waiting)


def _waits(gates: Any, since: float) -> list[float]:
    """Each admitted execution's wait at the gate, from its request to its admission."""
    return [
        entry.admitted_at - entry.requested_at
        for entry in gates.entries.values()
        if entry.admitted_at is not None and entry.admitted_at >= since
    ]


def _leaks(aws: InMemoryAws, executions: GatedExecutions, since: float) -> dict[str, list[float]]:
    """For each execution that died inside: from its death to its place freed, and to the next admission.

    A death whose place was never freed counts too, at least from its death to the end of
    the run (``unfreed …`` lists those): a figure that left it out would flatter the gate.
    Deaths in the run's last `JUDGED_SECONDS` are not judged: their places may still be freed in time.
    """
    freed = aws.table.inside_partition(GATE).deleted
    now = aws.scheduler.now
    admissions = sorted(moment for moment, _ in executions.gates.admissions)
    kinds = ("with its event", "without any event")
    found: dict[str, list[float]] = {kind: [] for kind in kinds}
    nexts: dict[str, list[float]] = {kind: [] for kind in kinds}
    unfreed: dict[str, list[float]] = {kind: [] for kind in kinds}
    for death in executions.deaths:
        kind = "without any event" if death.silent else "with its event"
        if not since <= death.at <= now - JUDGED_SECONDS:
            continue
        at = freed.get(execution_name(death.arn))
        if at is None:
            unfreed[kind].append(now - death.at)
            found[kind].append(now - death.at)
            nexts[kind].append(now - death.at)
            continue
        found[kind].append(at - death.at)
        following = next((moment for moment in admissions if moment >= at), None)
        nexts[kind].append((following if following is not None else now) - death.at)
    return {
        **{f"freed {kind}": value for kind, value in found.items()},
        **{f"next {k}": v for k, v in nexts.items()},
        **{f"unfreed {k}": v for k, v in unfreed.items()},
    }


def percentile(values: list[float], share: float) -> float:
    """The ``share`` percentile (nearest rank); NaN without values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def ceiling(result: dict[str, Any]) -> float:
    """The admissions a second the gate could make: MAX over the mean section, or SendTaskSuccess's refill."""
    refill = quotas.step_functions(result["region"])["SendTaskSuccess"].refill
    return min(MAX_CONCURRENCY / (sum(SECTION) / 2), refill)


def bill(result: dict[str, Any]) -> list[tuple[str, float]]:
    """What admitting costs per million admissions: the dispatcher's bill and the workflows' requests.

    The releases the workflows send are the end-event queue's requests, in the dispatcher's
    lines; the 2 transitions of the request and release tasks are priced apart.
    """
    per_admission = prices.PER_MILLION / max(1, result["admissions"])
    return [
        *billing.bill(result),
        (
            "SQS FIFO: the workflows' requests (one each)",
            result["requests"] * per_admission * prices.SQS_FIFO_REQUEST,
        ),
    ]


def summary(result: dict[str, Any]) -> str:
    """One JSON line of a run's main figures (for a progress log)."""
    return json.dumps(
        {key: result[key] for key in ("region", "admissions", "seconds", "taken_twice", "never_admitted")}
    )
