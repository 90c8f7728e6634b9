"""Where each spooled failure came from: its lane and message group, as the dispatcher recorded them.

A re-run goes back to the lane its execution came from: the lane recorded with its start
in the state table, or the only lane of its state machine. Where several lanes start one
state machine and no record is left, nothing is guessed (`destination`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from dispatcher.adapters.jobs import JobTable
from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.cli.config import Aws, Resources
from dispatcher.core.errors import DispatcherError
from dispatcher.core.executions import state_machine_of
from dispatcher.core.rerun import Destination, Origin, Spooled, destination
from dispatcher.core.topology import DEFAULT, Lane

LANE_SETTINGS = ("queue_url", "dead_letter_queue_url", "state_machine_arn")


@dataclass(frozen=True)
class Lanes:
    """Every configured lane, and which start each state machine (in configuration order)."""

    queues: dict[str, str]
    """Lane name → its queue."""
    of_machine: dict[str, list[str]]
    anywhere: tuple[str, ...] = ()
    """The lanes of a state machine ``of_machine`` doesn't name: lane default alone when the
    state machine isn't configured here (no ``STATE_MACHINE_ARN`` and no ``LANES``)."""

    @property
    def several(self) -> bool:
        """Whether there is more than one lane (the failures' lanes are worth showing)."""
        return len(self.queues) > 1

    def starting(self, machine: str) -> list[str]:
        """The lanes that start ``machine``, in configuration order."""
        return self.of_machine.get(machine, list(self.anywhere))

    def shared(self, machine: str) -> bool:
        """Whether several lanes start ``machine`` (a failure's lane is then told by its record only)."""
        return len(self.starting(machine)) > 1


def configured_lanes(resources: Resources) -> Lanes:
    """The lanes (without the default lane's state machine and no ``LANES``: lane default alone)."""
    if resources.unset(LANE_SETTINGS) is not None:
        return Lanes({DEFAULT: resources.queue_url or ""}, {}, (DEFAULT,))
    lanes = resources.topology().members_of(kind=Lane)
    of_machine: dict[str, list[str]] = {}
    for lane in lanes:
        of_machine.setdefault(lane.state_machine_arn, []).append(lane.name)
    return Lanes({lane.name: lane.queue_url for lane in lanes}, of_machine)


@dataclass
class Origins:
    """What the start records say of the failures that need them; those whose records can't be read."""

    found: dict[str, Origin] = field(default_factory=dict)
    """Execution ARN → what its start record says (a failure with no record left is missing)."""
    unread: dict[str, str] = field(default_factory=dict)
    """Execution ARN → why its start record could not be read (AWS still failing after retries)."""

    def why_unread(self, execution_arn: str) -> str | None:
        """Why a failure can't be re-run now: its start record could not be read (None: it could)."""
        reason = self.unread.get(execution_arn)
        return None if reason is None else f"its start record can't be read now ({reason}): run this again"


def read_origins(
    aws: Aws, resources: Resources, failures: Sequence[Spooled], lanes: Lanes, *, groups: bool
) -> Origins:
    """What each failure's start record says, for the failures that need it.

    ``groups``: every failure's group is wanted (a restart without ``--group``); otherwise
    only the failures of a state machine several lanes start are looked up (for their lane).
    Without a state table, none (said once on stderr). A failure whose records can't be
    read now is in ``unread``: its group and lane are not known, and nothing is guessed.
    """
    wanted = [
        item for item in failures if groups or lanes.shared(state_machine_of(item.failure.execution_arn))
    ]
    if not wanted:
        return Origins()
    if not resources.state_table:
        sys.stderr.write(
            "no state table configured: each re-run gets a group of its own (or pass --group),"
            " a failure of a state machine several lanes start needs --lane,"
            " and nothing records which way a failure was re-run\n"
        )
        return Origins()
    by_machine: dict[str, list[Spooled]] = {}
    for item in wanted:
        by_machine.setdefault(state_machine_of(item.failure.execution_arn), []).append(item)
    origins = Origins()
    for machine, items in by_machine.items():
        read = _origins_of(aws, resources, machine, items)
        origins.found |= read.found
        origins.unread |= read.unread
    return origins


def _origins_of(aws: Aws, resources: Resources, machine: str, items: Sequence[Spooled]) -> Origins:
    """The start records of one state machine's failures (all unread, said on stderr, on a failure)."""
    # Every lane's records are under the default lane's state machine.
    table = StartLedgerTable(
        aws.client("dynamodb"), resources.need("state_table"), resources.state_machine_arn or machine
    )
    try:
        origins = table.origins({item.failure.name: item.failure.started_at for item in items}, machine)
    except DispatcherError as error:
        sys.stderr.write(
            f"could not read the start records ({error}): their failures stay on the spool; run this again\n"
        )
        return Origins(unread={item.failure.execution_arn: str(error) for item in items})
    return Origins(
        found={
            item.failure.execution_arn: origins[item.failure.name]
            for item in items
            if item.failure.name in origins
        }
    )


def destination_of(item: Spooled, origins: Origins, lanes: Lanes, chosen: str | None) -> Destination | None:
    """The lane ``item``'s re-run goes to, or why it can't be known; None: not ``--lane``'s failure."""
    origin = origins.found.get(item.failure.execution_arn)
    machine = state_machine_of(item.failure.execution_arn)
    return destination(None if origin is None else origin.lane, lanes.starting(machine), chosen)


def cancelled(aws: Aws, resources: Resources, lane: str, name: str) -> str | None:
    """Why a failure must not be re-run: its job was stopped by ``cancel --stop``; else None.

    Needs ``STATE_TABLE`` and the default lane's state machine (which key the job records);
    without them nothing can say, and None is the answer.
    """
    if not resources.state_table or not resources.state_machine_arn:
        return None
    table = JobTable(aws.client("dynamodb"), resources.state_table, resources.state_machine_arn)
    record = table.record(lane, name)
    if record is None or not record.stopped:
        return None  # a job cancelled before it started has no failure; one dropped as a repeat ran
    return f"cancelled ({record.reason or 'no reason given'}): a cancelled job is never re-run"
