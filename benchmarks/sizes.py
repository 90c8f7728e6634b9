"""Section 16: jobs of several slots — a pool of 3,000 slots, jobs sized like Glue runs, no starvation.

The unchanged tick service on the in-memory AWS (tests/support/sim), in virtual time, at
us-east-1's quotas, deployed as the template deploys it (schedule every minute, batched end
events). Pool default has MAX 3,000 slots; a producer keeps a deep backlog in 100 groups: 80 %
of the jobs take 1-2 slots, 20 % take 10-40 (a Glue run's DPUs, sent in 20 groups of their
own), each runs 60-600 s. Four
runs side by side, the same jobs (one seed):

- **sizes**: the jobs carry ``Slots``; the dispatcher keeps each large job that found too few
  free slots a reservation (DESIGN.md "A job's size");
- **Airflow's rule**: the same, with the reservation taken out of the tick (what `pool_slots`
  does: a freed slot goes to whichever job fits first, so a large job waits for a lull);
- **static MAX = 3,000 ÷ 40 = 75**: no sizes, a MAX that can't over-commit whatever runs;
- **no sizes**: the same backlog without ``Slots``, at a MAX of executions that runs as many
  as the sized run does (3,000 slots ÷ the mean size, 6.2: 484) — the bill's baseline, what
  the same starts cost without sizes (a tick's cost is per tick, so a baseline that starts
  six times as many jobs would bill each start a sixth of it).

Measured after the first 10 minutes (the pool fills once and the first runs end): the slots
in use over MAX; a large job's wait from its first receive (the head of its group, where the
tick first sees it) to its start, p95, and how many never started (with the longest such wait:
one received in the run's last minutes has not started yet, one starved has waited long); the
slots kept idle while a reservation held them; the bill per million executions.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

from benchmarks import billing
from benchmarks.full_scale import EVENTS, LAG, measure, progress, template_settings
from dispatcher.adapters.size_items import RESERVED, sizes_key
from dispatcher.core.messages import SLOTS_ATTRIBUTE
from dispatcher.core.topology import DEFAULT
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.function import EventSourceMapping, Function
from tests.support.sim.sqs import Message

MAX_SLOTS = 3000
SMALL, LARGE = (1, 2), (10, 40)
LARGE_SHARE = 0.2
SHORTEST, LONGEST = 60.0, 600.0
GROUPS = 100
LARGE_GROUPS = 20
"""Of the groups, those the large jobs are sent in (the small ones go in the other 80): a large
job's own producers, as a team's Glue runs are, so small jobs don't queue behind it."""
WAITING = 1500
"""Jobs kept queued: more than a tick can start, however they are sized."""
SETTLING_SECONDS = 600.0
"""The first 10 minutes are left out of the slots in use and of the waits (the pool fills once)."""
SAMPLE_SECONDS = 5.0
RUN_SECONDS = 3000.0
STATIC_MAX = MAX_SLOTS // LARGE[1]
MEAN_SIZE = (1 - LARGE_SHARE) * sum(SMALL) / 2 + LARGE_SHARE * sum(LARGE) / 2
SAME_STARTS_MAX = round(MAX_SLOTS / MEAN_SIZE)
"""The MAX of executions at which the backlog without sizes runs as many as with them (484)."""
RUNS = (
    ("sizes", MAX_SLOTS, True, True),
    ("Airflow's rule (no reservation)", MAX_SLOTS, True, False),
    (f"static MAX {STATIC_MAX} (slots ÷ largest)", STATIC_MAX, False, True),
    (f"no sizes (MAX {SAME_STARTS_MAX}: slots ÷ mean size)", SAME_STARTS_MAX, False, True),
)
"""(label, MAX, whether jobs carry ``Slots``, whether the tick reserves)."""
TARGETS = {"used": 0.90, "wait_p95": 2 * LONGEST, "reserved_idle": 0.05, "bill": 0.02}


def _keep_backlog(aws: InMemoryAws, rng: random.Random, until: float, *, sized: bool, weigh: bool) -> None:
    """A producer keeping `WAITING` jobs queued; ``sized``: with ``Slots``; ``weigh``: the world weighs."""
    sequence = {"next": 0}

    def top_up() -> None:
        visible, _ = aws.queue.depth()
        for _ in range(WAITING - visible):
            job = sequence["next"]
            sequence["next"] += 1
            low, high = LARGE if rng.random() < LARGE_SHARE else SMALL
            slots = rng.randint(low, high)
            seconds = round(rng.uniform(SHORTEST, LONGEST), 3)
            body = {"job": job, "seconds": seconds, **({"slots": slots} if weigh else {})}
            attributes = {SLOTS_ATTRIBUTE: {"DataType": "Number", "StringValue": str(slots)}} if sized else {}
            group = job % LARGE_GROUPS if low == LARGE[0] else LARGE_GROUPS + job % (GROUPS - LARGE_GROUPS)
            aws.queue.send(json.dumps(body), f"g{group}", attributes=attributes)
        if aws.scheduler.now + 1 < until:
            aws.scheduler.call_at(aws.scheduler.now + 1, top_up)

    top_up()


def _without_reservations() -> None:
    """Take the reservation out of the tick (this process only): Airflow's first-fit rule."""
    from dispatcher.tick import reservations, ticking  # noqa: PLC0415 — the baseline's own process

    def keeps_nothing(*_arguments: Any, **_keywords: Any) -> None:
        return None

    ticking.reserve_of = keeps_nothing  # type: ignore[assignment]
    reservations.ReservationKeeper.settle = keeps_nothing  # type: ignore[method-assign]


def run(
    label: str, max_concurrency: int, sized: bool, reserves: bool, seconds: float = RUN_SECONDS
) -> dict[str, Any]:
    """One run: slots in use and reservations sampled every 5 s; each large job's wait."""
    if not reserves:
        _without_reservations()
    aws = InMemoryAws(region="us-east-1", lag=LAG, events=EVENTS, seed=16)
    weigh = not label.startswith("no sizes")
    aws.world.max_concurrency = MAX_SLOTS if weigh else max_concurrency
    began = aws.scheduler.now
    end = began + 60.0 + seconds
    _keep_backlog(aws, random.Random(16), end, sized=sized, weigh=weigh)
    deployed = template_settings(aws).model_copy(update={"max_concurrency": max_concurrency})
    function = Function(aws, deployed, mapping=EventSourceMapping())
    function.schedule(60.0, until=end)
    samples: list[tuple[float, int, bool]] = []

    def sample() -> None:
        item = aws.table.item(sizes_key(DEFAULT))
        used = sum(execution.slots for execution in aws.world.running())
        samples.append((aws.scheduler.now - began, used, item is not None and RESERVED in item))
        if aws.scheduler.now + SAMPLE_SECONDS < end:
            aws.scheduler.call_at(aws.scheduler.now + SAMPLE_SECONDS, sample)

    aws.scheduler.call_at(began + SAMPLE_SECONDS, sample)
    progress(aws, f"section 16: {label}", end)
    result = measure(aws, function, "us-east-1", seconds, end)
    waits, never = _large_waits(aws, began + SETTLING_SECONDS, end)
    return {
        **result,
        "label": label,
        "max": max_concurrency,
        "samples": samples,
        "waits": waits,
        "never": never,
        "weighed": weigh,
    }


def _large_waits(aws: InMemoryAws, since: float, end: float) -> tuple[list[float], list[float]]:
    """Each large job first received after ``since``: its wait to its start; never started: its wait yet."""
    started = {execution.name: execution.started_at for execution in aws.started()}
    waits: list[float] = []
    never: list[float] = []
    for message in aws.queue.sent:
        received = message.first_received_at
        if received is None or received < since or _slots(message) < LARGE[0]:
            continue
        at = started.get(message.message_id)
        if at is None:
            never.append(end - received)
        else:
            waits.append(at - received)
    return waits, never


def _slots(message: Message) -> int:
    """A job's size, from its ``Slots`` (the static and unsized runs' jobs carry it in their input)."""
    value = message.attributes.get(SLOTS_ATTRIBUTE, {}).get("StringValue")
    slots = json.loads(message.body).get("slots", 1) if value is None else int(value)
    return slots if isinstance(slots, int) else 1


def used_share(result: dict[str, Any]) -> float:
    """The mean slots in use over MAX's slots, after the first 10 minutes."""
    used = [slots for at, slots, _ in result["samples"] if at >= SETTLING_SECONDS]
    return sum(used) / max(1, len(used)) / MAX_SLOTS


def reserved_idle(result: dict[str, Any]) -> float:
    """The slots left idle while a reservation held them, over all the slots, after the first 10 minutes."""
    kept = [MAX_SLOTS - slots for at, slots, held in result["samples"] if at >= SETTLING_SECONDS and held]
    measured = sum(1 for at, _, _ in result["samples"] if at >= SETTLING_SECONDS)
    return sum(kept) / max(1, measured) / MAX_SLOTS


def p95(values: list[float]) -> float | None:
    """The 95th percentile (nearest rank), None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} s"


def _used(result: dict[str, Any]) -> str:
    """The slots-used cell: none for the run whose jobs carry no size at all."""
    return f"{used_share(result):.1%}" if result["weighed"] else "-"


def lines(results: list[dict[str, Any]]) -> list[str]:
    """Each run's row: slots in use, large jobs' wait p95 (and never started), idle for reservations, bill."""
    out = [
        f"   {'':<38} {'slots used':>10} {'large wait p95':>15} {'never started':>14}"
        f" {'reserved idle':>14} {'bill / M':>10} {'starts':>8}"
    ]
    for result in results:
        never = result["never"]
        out.append(
            f"   {result['label']:<38} {_used(result):>10} {_seconds(p95(result['waits'])):>15}"
            f" {len(never):>6} ({_seconds(max(never, default=None)):>6})"
            f" {reserved_idle(result):>14.1%} {'$' + format(billing.total(result), '.3f'):>10}"
            f" {result['starts']:>8,}"
        )
    return out


def targets(results: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """The sizes run against the section's targets; the bill against the run without sizes."""
    sized, no_sizes = results[0], results[-1]
    wait = p95(sized["waits"])
    base, bill = billing.total(no_sizes), billing.total(sized)
    change = bill / base - 1 if base else 0.0
    return [
        (
            f"at least {TARGETS['used']:.0%} of the slots used",
            used_share(sized) >= TARGETS["used"],
            f"{used_share(sized):.1%}",
        ),
        (
            f"a large job's wait p95 at most {TARGETS['wait_p95']:.0f} s (2 × the longest run),"
            " none left waiting longer",
            wait is not None and max([wait, *sized["never"]]) <= TARGETS["wait_p95"],
            f"{_seconds(wait)}; {len(sized['never'])} not started by the end,"
            f" the longest waiting {_seconds(max(sized['never'], default=None))}",
        ),
        (
            f"at most {TARGETS['reserved_idle']:.0%} of the slots idle for reservations",
            reserved_idle(sized) <= TARGETS["reserved_idle"],
            f"{reserved_idle(sized):.1%}",
        ),
        (
            f"the bill within {TARGETS['bill']:.0%} of the same backlog without sizes",
            abs(change) <= TARGETS["bill"],
            f"${bill:.3f} against ${base:.3f}: {change:+.1%}",
        ),
    ]
