"""Every pool, lane and gate of `dispatcher local`: what ``--lane``, ``--gate`` or a ``--lanes`` file names.

A ``--lanes`` file is a ``LANES`` document. The emulator creates what it names, by name:
each lane's and gate's queue and dead-letter queue (the last part of the URL), each lane's
state machine (a sample workflow) and each gate's (a sample gated workflow that asks at
that gate; a state machine a lane and a gate both name is the gated one, which the lane
starts). So the document a deployment runs with can be tried as it is. A lane or gate may
leave them out: they are then ``<stack>-<name>-jobs.fifo``, ``<stack>-<name>-dead-letters.fifo``
and ``<stack>-<name>-workflow`` (a gate's ``<stack>-<name>-gated``). The stack's own
workflow, ``<stack>-workflow``, is lane default's: a lane that names it shares it.

The document is checked as the function checks ``LANES`` before anything is created, so
a mistake is one line naming its field, not a dispatcher that dies after its banner.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import boto3

from dispatcher.core.errors import ConfigurationError
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.lanes import parse_lanes
from dispatcher.core.lanes_document import STATE_MACHINE_ARN_PATTERN
from dispatcher.core.topology import DEFAULT, Lane, Topology
from dispatcher.local.account import ACCOUNT_ID, REGION
from dispatcher.local.gates import GATE, create_release_queue, gated_name, gated_workflow
from dispatcher.local.stack import Stack, fifo_queues, workflow_name
from dispatcher.local.workflows import sample_workflow

MEMBER_RESOURCES = ("queue_url", "dead_letter_queue_url", "state_machine_arn")


@dataclass
class LocalMembers:
    """What `dispatcher local` serves beyond lane default: its ``LANES`` and the resources behind it."""

    document: dict[str, Any] = field(default_factory=dict)
    """``LANES`` with the emulator's URLs and ARNs."""
    release_queue_url: str | None = None
    """The end-event queue gated workflows send their releases to (with gates)."""
    lane_machines: list[str] = field(default_factory=list)
    """Every lane's state machine (lane default's first): its ends tick, its failures are spooled."""
    gated_machines: list[str] = field(default_factory=list)
    """Every gate's state machine: its ends reach the ticks with the releases."""

    @property
    def lanes_variable(self) -> str:
        """``LANES`` as the function's variable ("" for none)."""
        return json.dumps(self.document) if self.document else ""


def name_of(url_or_arn: str) -> str:
    """The resource name a queue URL or a state machine ARN ends in."""
    return urlsplit(url_or_arn).path.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def machine_arn(name: str) -> str:
    """The emulator's ARN of the state machine ``name``."""
    return f"arn:aws:states:{REGION}:{ACCOUNT_ID}:stateMachine:{name}"


def _localised(
    stack: Stack, endpoint_url: str, entries: dict[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """Each entry with the emulator's URLs and ARNs for the names it gives (or its defaults)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for kind, listed in entries.items():
        found[kind] = []
        for entry in listed:
            prefix = f"{stack.name}-{entry['name']}"
            machine = gated_name(stack.name, entry["name"]) if kind == "gates" else workflow_name(prefix)
            names = {
                "queue_url": f"{prefix}-jobs.fifo",
                "dead_letter_queue_url": f"{prefix}-dead-letters.fifo",
                "state_machine_arn": machine,
            }
            names |= {key: name_of(entry[key]) for key in MEMBER_RESOURCES if entry.get(key)}
            found[kind].append(
                {
                    **entry,
                    "queue_url": f"{endpoint_url}/{ACCOUNT_ID}/{names['queue_url']}",
                    "dead_letter_queue_url": f"{endpoint_url}/{ACCOUNT_ID}/{names['dead_letter_queue_url']}",
                    "state_machine_arn": machine_arn(names["state_machine_arn"]),
                }
            )
    return found


def local_members(  # noqa: PLR0913 — one keyword per way of naming members
    stack: Stack,
    endpoint_url: str,
    *,
    wait_seconds: float,
    lanes: Sequence[tuple[str, int]] = (),
    gate: bool = False,
    document: dict[str, Any] | None = None,
) -> LocalMembers:
    """Create the members the options name, and return their ``LANES``.

    ``lanes``: ``--lane NAME=PRIORITY`` (into the stack's state machine and pool); ``gate``:
    ``--gate`` (gate ``gate`` on a sample gated workflow, in pool default); ``document``: a
    ``--lanes`` file. Raises a `ConfigurationError` naming the field, as the function would,
    before creating anything.
    """
    planned = _planned(stack, endpoint_url, lanes=lanes, gate=gate, document=document)
    sqs, sfn = boto3.client("sqs", region_name=REGION), boto3.client("stepfunctions", region_name=REGION)
    release = create_release_queue(stack.name) if planned["gates"] else None
    made = {stack.state_machine_arn}
    for kind in ("gates", "lanes"):
        for entry in planned[kind]:
            entry["queue_url"], entry["dead_letter_queue_url"] = fifo_queues(
                sqs, name_of(entry["queue_url"]), name_of(entry["dead_letter_queue_url"])
            )
            if entry["state_machine_arn"] in made:
                continue
            definition = (
                gated_workflow(
                    entry["name"],
                    entry["queue_url"],
                    str(release),
                    section_seconds=wait_seconds,
                    group_from_input=True,
                )
                if kind == "gates"
                else sample_workflow(wait_seconds, stack.downstream_table or None, slots=True)
            )
            entry["state_machine_arn"] = sfn.create_state_machine(
                name=name_of(entry["state_machine_arn"]),
                definition=definition,
                roleArn=f"arn:aws:iam::{ACCOUNT_ID}:role/{stack.name}-workflow",
            )["stateMachineArn"]
            made.add(entry["state_machine_arn"])
    found = {key: value for key, value in planned.items() if value}
    topology = _checked(stack, found)
    return LocalMembers(
        document=found,
        release_queue_url=release,
        lane_machines=list(topology.state_machines),
        gated_machines=list(dict.fromkeys(gate.state_machine_arn for gate in topology.members_of(kind=Gate))),
    )


def check_members(
    stack_name: str, *, lanes: Sequence[tuple[str, int]] = (), gate: bool = False, document: dict[str, Any]
) -> None:
    """Every rule `local_members` checks, with no emulator yet: a mistake in a file, said at once.

    Raises the `ConfigurationError` `local_members` would (its URLs on ``127.0.0.1``).
    """
    endpoint_url = "http://127.0.0.1:0"
    stack = Stack(
        queue_url=f"{endpoint_url}/{ACCOUNT_ID}/{stack_name}-jobs.fifo",
        dead_letter_queue_url=f"{endpoint_url}/{ACCOUNT_ID}/{stack_name}-dead-letters.fifo",
        state_machine_arn=machine_arn(workflow_name(stack_name)),
        state_table=f"{stack_name}-state",
        control_parameter=f"/{stack_name}/control",
    )
    _planned(stack, endpoint_url, lanes=lanes, gate=gate, document=document)


def _planned(
    stack: Stack,
    endpoint_url: str,
    *,
    lanes: Sequence[tuple[str, int]],
    gate: bool,
    document: dict[str, Any] | None,
) -> dict[str, Any]:
    """The document with every member's URLs and ARNs in the emulator, checked as ``LANES`` is."""
    document = dict(document or {})
    for kind in ("lanes", "gates"):
        if not isinstance(document.get(kind, []), list):
            raise ConfigurationError(f"LANES: {kind}: input should be a valid list")
    entries: dict[str, list[dict[str, Any]]] = {
        "lanes": [*document.get("lanes", [])],
        "gates": [*document.get("gates", [])],
    }
    entries["lanes"] += [
        {"name": name, "priority": priority, "state_machine_arn": stack.state_machine_arn}
        for name, priority in lanes
    ]
    if gate:
        entries["gates"].append({"name": GATE})
    _check_entries(entries)
    planned = {**document, **_localised(stack, endpoint_url, entries)}
    _checked(stack, planned)  # every rule of LANES, before anything is created
    return planned


def _check_entries(entries: dict[str, list[dict[str, Any]]]) -> None:
    """What must hold before the names can be read: each entry an object with a name, URLs as text."""
    for kind, listed in entries.items():
        for index, entry in enumerate(listed):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise ConfigurationError(f"LANES: {kind}[{index}].name: field required")
            for key in MEMBER_RESOURCES:
                if key in entry and not isinstance(entry[key], str):
                    raise ConfigurationError(f"LANES: {kind}[{index}].{key}: input should be a valid string")
                if key in entry and not _looks_right(key, entry[key]):
                    what = "a state machine ARN" if key == "state_machine_arn" else "a queue URL"
                    raise ConfigurationError(
                        f"LANES: {kind}[{index}].{key}: {entry[key]!r} is not {what}"
                        f" (e.g. {EXAMPLES[key]}); leave it out and the emulator names one"
                    )


EXAMPLES = {
    "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo",
    "dead_letter_queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/dead-letters.fifo",
    "state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:jobs",
}


def _looks_right(key: str, value: str) -> bool:
    """Whether a queue URL is an http(s) URL with a path, and a state machine ARN is one."""
    if key == "state_machine_arn":
        return re.match(STATE_MACHINE_ARN_PATTERN, value) is not None
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc) and parts.path.strip("/") != ""


def _checked(stack: Stack, document: dict[str, Any]) -> Topology:
    """The document as the function reads it (with lane default): every rule of ``LANES``."""
    default = Lane(DEFAULT, DEFAULT, stack.queue_url, stack.dead_letter_queue_url, stack.state_machine_arn)
    return parse_lanes(json.dumps(document), default, 0)
