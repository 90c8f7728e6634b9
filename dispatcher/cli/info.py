"""`dispatcher info`: what a deployed stack gives its producers and operators, from its outputs."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from dispatcher.cli.args import AddCommand
from dispatcher.cli.config import Aws, Resources, describe_stack
from dispatcher.settings import DASHBOARD_OUTPUT, PRODUCER_OUTPUTS


def prepare_info(args: argparse.Namespace) -> list[str]:
    """`info` reads a stack: without ``--stack`` there is nothing to describe."""
    if not args.stack:
        return ["info describes a deployed stack: give --stack NAME (the name `sam deploy` used)"]
    return []


def command_info(args: argparse.Namespace, aws: Aws, _resources: Resources, out: TextIO) -> int:
    """Print the stack's outputs: a producer's first, then the dashboard, then the rest."""
    stack = describe_stack(aws.client("cloudformation"), args.stack)
    outputs = stack.outputs
    region = aws.client("cloudformation").meta.region_name
    if args.json:
        document = {
            "stack": args.stack,
            "region": region,
            "status": stack.status,
            "outputs": outputs,
            "parameters": stack.parameters,
        }
        out.write(json.dumps(document) + "\n")
        return 0
    first = [key for key in (*PRODUCER_OUTPUTS, DASHBOARD_OUTPUT) if key in outputs]
    keys = first + sorted(set(outputs) - set(first))
    width = max((len(key) for key in keys), default=0)
    out.write(f"stack {args.stack} in {region} ({stack.status})\n")
    out.writelines(f"  {key.ljust(width)}  {outputs[key]}\n" for key in keys)
    queue, policy = PRODUCER_OUTPUTS
    if queue in outputs:
        attached = f", under a role with {policy} attached" if policy in outputs else ""
        out.write(f"Producers send jobs to {queue}{attached} (docs/producers.md).\n")
    return 0


def register(command: AddCommand) -> None:
    """Add `info`."""
    command(
        "info",
        command_info,
        "What a deployed stack gives producers and operators: the job queue, the producer policy,"
        " the dashboard and every other output.",
        "  dispatcher --stack jobs info\n"
        "  dispatcher --stack jobs info --json | jq -r .outputs.JobQueueUrl\n",
        prepare=prepare_info,
    )
