"""`dispatcher info`: what a deployed stack gives its producers, gated workflows and operators.

Its outputs, then every URL a producer or a gated workflow needs: each lane's queue, each
gate's request queue, the release queue, and the policies to attach.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, TextIO

from dispatcher.cli.args import AddCommand
from dispatcher.cli.config import Aws, Resources, control_parameter, describe_stack
from dispatcher.cli.output import table
from dispatcher.cli.status_view import settings_text
from dispatcher.core.control import Control
from dispatcher.core.effective import Setting, settings
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.topology import Lane, Topology
from dispatcher.settings import (
    DASHBOARD_OUTPUT,
    GATED_WORKFLOW_POLICY_OUTPUT,
    LANES_OUTPUT,
    PRODUCER_OUTPUTS,
    RELEASE_QUEUE_OUTPUT,
)

LANE_SETTINGS = ("queue_url", "dead_letter_queue_url", "state_machine_arn")
"""What the lanes are read with (``LANES`` is read with the default lane's settings)."""


def prepare_info(args: argparse.Namespace) -> list[str]:
    """`info` reads a stack: without ``--stack`` there is nothing to describe."""
    if not args.stack:
        return ["info describes a deployed stack: give --stack NAME (the name `sam deploy` used)"]
    return []


def _topology(resources: Resources) -> Topology | None:
    """Every lane and gate of the stack, when its outputs say (a stack that lacks them: None)."""
    if resources.unset(LANE_SETTINGS) is not None:
        return None
    return resources.topology()


def members(topology: Topology | None, release_queue_url: str | None) -> dict[str, list[dict[str, Any]]]:
    """The ``lanes`` and ``gates`` of ``info --json``: each one's name, pool and URLs."""
    if topology is None:
        return {"lanes": [], "gates": []}
    lanes = [
        {
            "name": lane.name,
            "pool": lane.pool,
            "queue_url": lane.queue_url,
            "dead_letter_queue_url": lane.dead_letter_queue_url,
            "state_machine_arn": lane.state_machine_arn,
        }
        for lane in topology.members_of(kind=Lane)
    ]
    gates = [
        {
            "name": gate.name,
            "pool": gate.pool,
            "queue_url": gate.queue_url,
            "dead_letter_queue_url": gate.dead_letter_queue_url,
            "state_machine_arn": gate.state_machine_arn,
            "release_queue_url": release_queue_url,
        }
        for gate in topology.members_of(kind=Gate)
    ]
    return {"lanes": lanes, "gates": gates}


def _output_keys(outputs: dict[str, str], *, laned: bool) -> list[str]:
    """The outputs to list, a producer's first."""
    first = [key for key in (*PRODUCER_OUTPUTS, DASHBOARD_OUTPUT) if key in outputs]
    # With lanes or gates, their tables below say what LanesDocument holds, a line at a time.
    shown = set(outputs) - {LANES_OUTPUT} if laned else set(outputs)
    return first + sorted(shown - set(first))


def command_info(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Print the stack's outputs (a producer's first), then its lanes' and gates' URLs."""
    stack = describe_stack(aws.client("cloudformation"), args.stack)
    outputs = stack.outputs
    region = aws.client("cloudformation").meta.region_name
    release = outputs.get(RELEASE_QUEUE_OUTPUT)
    topology = _topology(resources)
    found = members(topology, release)
    configured = () if topology is None else settings(topology, _control(aws, resources))
    _add_settings(found, configured)
    if args.json:
        document: dict[str, Any] = {
            "stack": args.stack,
            "region": region,
            "status": stack.status,
            "outputs": outputs,
            "parameters": stack.parameters,
            **found,
        }
        out.write(json.dumps(document) + "\n")
        return 0
    laned = topology is not None and len(topology.members) > 1
    keys = _output_keys(outputs, laned=laned)
    width = max((len(key) for key in keys), default=0)
    out.write(f"stack {args.stack} in {region} ({stack.status})\n")
    out.writelines(f"  {key.ljust(width)}  {outputs[key]}\n" for key in keys)
    if laned:
        _write_members(out, found, outputs, release)
        _write_settings(out, configured)
    else:
        _write_producers(out, outputs)
    return 0


def _write_producers(out: TextIO, outputs: dict[str, str]) -> None:
    """Where producers send their jobs (a dispatcher of one lane)."""
    queue, policy = PRODUCER_OUTPUTS
    if queue in outputs:
        attached = f", under a role with {policy} attached" if policy in outputs else ""
        out.write(f"Producers send jobs to {queue}{attached} (docs/producers.md).\n")


def _write_settings(out: TextIO, configured: Sequence[Setting]) -> None:
    """The members' settings that are set anywhere, with their sources."""
    if configured:
        text = settings_text((f"{each.kind} {each.member}", each.key, each.as_json()) for each in configured)
        out.write(f"\n{text}\n")


def _add_settings(found: dict[str, Any], configured: Sequence[Setting]) -> None:
    """Each member's entry with the settings set anywhere (``settings``: key → value, source, configured)."""
    for entry in (*found["lanes"], *found["gates"]):
        kind = "lane" if entry in found["lanes"] else "gate"
        entry["settings"] = {
            each.key: each.as_json()
            for each in configured
            if (each.kind, each.member) == (kind, entry["name"])
        }


def _control(aws: Aws, resources: Resources) -> Control | None:
    """The control parameter's overrides (None: none, or one the ticks can't read: `status` says why)."""
    parameter = control_parameter(aws, resources)
    try:
        return None if parameter is None else parameter.read()
    except ConfigurationError:
        return None


def _write_members(out: TextIO, found: dict[str, Any], outputs: dict[str, str], release: str | None) -> None:
    """The lanes' and gates' tables, and where producers and gated workflows send."""
    _, policy = PRODUCER_OUTPUTS
    out.write("\n" + _member_tables(found) + "\n\n")
    attached = f" ({policy} grants lane default's)" if policy in outputs else ""
    out.write(f"Producers send each lane's jobs to its QUEUE{attached} (docs/producers.md).\n")
    if found["gates"]:
        gated_policy = outputs.get(GATED_WORKFLOW_POLICY_OUTPUT)
        grants = f", under a role with {GATED_WORKFLOW_POLICY_OUTPUT} attached" if gated_policy else ""
        out.write(
            "A gated workflow sends its requests to its gate's QUEUE and its releases to"
            f" {RELEASE_QUEUE_OUTPUT} {release or '(not an output of this stack)'}{grants} (docs/gates.md).\n"
        )


def _member_tables(found: dict[str, list[dict[str, Any]]]) -> str:
    """A row per lane and per gate: name, pool, queue and dead-letter queue."""
    headers = ["POOL", "QUEUE", "DEAD-LETTER QUEUE"]
    keys = ["name", "pool", "queue_url", "dead_letter_queue_url"]
    lanes = table(["LANE", *headers], [[entry[key] for key in keys] for entry in found["lanes"]])
    if not found["gates"]:
        return lanes
    gates = table(["GATE", *headers], [[entry[key] for key in keys] for entry in found["gates"]])
    return f"{lanes}\n\n{gates}"


def register(command: AddCommand) -> None:
    """Add `info`."""
    command(
        "info",
        command_info,
        "What a deployed stack gives producers, gated workflows and operators: each lane's queue, each"
        " gate's request queue, the release queue, the policies, the dashboard and every other output.",
        "  dispatcher --stack jobs info\n"
        "  dispatcher --stack jobs info --json | jq -r .outputs.JobQueueUrl\n"
        "  dispatcher --stack jobs info --json | jq -r '.gates[] | .queue_url, .release_queue_url'\n",
        prepare=prepare_info,
    )
