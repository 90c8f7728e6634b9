"""A scenario's jobs: the messages its producer sends, with poison and the producer's redeliveries.

About an eighth of a backlog is poison, one kind each (`POISON_KINDS`: the reason its
dead letter must carry), and some jobs repeat an earlier one (same name, same input, the
same group, sent later).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from dispatcher.core.executions import MAX_INPUT_BYTES
from tests.support.faulty_aws import REJECTED_INPUT_MARKER

MAX_DURATION_SECONDS = 120.0

# What each kind of poison is, and the DispatchError it must get.
POISON_KINDS: dict[str, str] = {
    "invalid json": "input is not valid JSON",
    "blank body": "input is not valid JSON",
    "too large": f"larger than the {MAX_INPUT_BYTES}-byte Step Functions limit",
    "name with space": "invalid ExecutionName: execution name contains whitespace",
    "name too long": "invalid ExecutionName: execution name is 81 characters, longer than 80",
    "binary name": "ExecutionName attribute must be of type String, not Binary",
    "rejected input": "Step Functions rejected the start: InvalidExecutionInput",
    "name collision": "name collision",
}
REASONS: dict[str, str] = {**POISON_KINDS, "too many slots": "too large: "}
"""Each poison kind's reason: the drawn ones, and a job too large for any MAX (`tests.faults.sizes`)."""


@dataclass
class Job:
    """One message a producer sends, and what must become of it."""

    key: str
    group: str
    body: str
    arrives: int
    name: str | None = None
    name_type: str = "String"
    poison: str | None = None
    """The kind of poison (a key of POISON_KINDS), or None for a valid job."""
    duplicate_of: str | None = None
    """The key of the job this one repeats (same name, same input)."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Further message attributes, as SendMessage takes them."""
    message_id: str = ""
    lane: str | None = None
    """The lane whose queue it is sent to (None: lane default)."""

    @property
    def execution_name(self) -> str:
        """The execution this job must end as (valid jobs only)."""
        return self.name or self.message_id


def backlog(rng: random.Random, size: int, groups: list[str], arrival_ticks: int) -> list[Job]:
    """``size`` jobs in ``groups``, each arriving before one of the first ``arrival_ticks`` ticks."""
    jobs: list[Job] = []
    named: list[Job] = []
    for index in range(size):
        key = f"{rng.getrandbits(32):08x}-{index}"
        group = rng.choice(groups)
        arrives = rng.randrange(arrival_ticks)
        seconds = rng.choice([0.0, 1.0, 10.0, 45.0, MAX_DURATION_SECONDS])
        downstream = rng.random() < 0.4
        body = json.dumps({"job": key, "seconds": seconds, **({"downstream": True} if downstream else {})})
        draw = rng.random()
        if draw < 0.12:
            jobs.append(poison(rng, key, group, arrives, named))
        elif draw < 0.2 and named:
            original = rng.choice(named)
            # Same group, sent later: a redelivery from the producer's side.
            jobs.append(
                Job(
                    key,
                    original.group,
                    original.body,
                    max(arrives, original.arrives),
                    original.name,
                    duplicate_of=original.key,
                )
            )
        else:
            job = Job(key, group, body, arrives, name=f"job-{key}" if rng.random() < 0.5 else None)
            jobs.append(job)
            if job.name:
                named.append(job)
    return jobs


def poison(  # noqa: PLR0911 — one return per kind of poison
    rng: random.Random, key: str, group: str, arrives: int, named: list[Job]
) -> Job:
    """One poison job, of a kind drawn from `POISON_KINDS` (a name collision repeats one of ``named``)."""
    kind = rng.choice(list(POISON_KINDS))
    body = json.dumps({"job": key})
    if kind == "name collision" and named:
        original = rng.choice(named)
        return Job(key, original.group, body, max(arrives, original.arrives), original.name, poison=kind)
    if kind in {"name collision", "invalid json"}:
        return Job(key, group, f"{{not json {key}", arrives, poison="invalid json")
    if kind == "blank body":
        return Job(key, group, " \n\t", arrives, poison=kind)
    if kind == "too large":
        padding = "x" * (MAX_INPUT_BYTES - len(body) + 1)
        return Job(key, group, json.dumps({"job": key, "padding": padding}), arrives, poison=kind)
    if kind == "name with space":
        return Job(key, group, body, arrives, name=f"job {key}", poison=kind)
    if kind == "name too long":
        return Job(key, group, body, arrives, name="n" * 81, poison=kind)
    if kind == "binary name":
        return Job(key, group, body, arrives, name=f"job-{key}", name_type="Binary", poison=kind)
    return Job(key, group, json.dumps({"job": key, "note": REJECTED_INPUT_MARKER}), arrives, poison=kind)
