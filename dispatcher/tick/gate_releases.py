"""Releases: executions that say they left a gate, their places freed at once by any invocation."""

from __future__ import annotations

from collections.abc import Sequence

from dispatcher.core.errors import TransientError
from dispatcher.core.events import Release
from dispatcher.core.gates import release_problem
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.topology import Topology
from dispatcher.telemetry import logger
from dispatcher.tick.gate_ports import GatePorts
from dispatcher.tick.ports import Ports, Runtime

RELEASE_THREADS = 32
"""Releases of one invocation deleted at once (each a conditional `DeleteItem`)."""


def release(releases: Sequence[Release], topology: Topology, ports: Ports, runtime: Runtime) -> None:
    """Free the places of the executions that say they left a gate, each one a conditional delete, at once.

    A release of an unknown gate or of another state machine's execution, one for an
    execution not inside, or sent before its admission (an earlier entry's) frees nothing.
    One that fails after retries leaves the place until the execution's end or a check
    with Step Functions frees it.
    """
    machines = {gate.name: gate.state_machine_arn for gate in topology.members_of(kind=Gate)}
    rosters = {gate.name: gate.admissions for gate in ports.of_kind(GatePorts)}
    valid = []
    for each in releases:
        problem = release_problem(each, machines)
        if problem is None:
            valid.append(each)
        else:
            logger.warning("skipped a release", extra={"execution": each.execution_arn, "reason": problem})
    if not valid:
        return
    with runtime.pool(min(len(valid), RELEASE_THREADS)) as threads:
        freed = threads.gather(
            lambda each: rosters[each.gate].release(
                topology.member(each.gate, Gate), each.name, each.sent_at
            ),
            valid,
        )
    for each, result in zip(valid, freed, strict=True):
        if isinstance(result, TransientError):
            logger.warning(
                "could not release", extra={"execution": each.execution_arn, "reason": str(result)}
            )
        elif isinstance(result, BaseException):
            raise result
        else:
            logger.info(
                "released" if result else "released nothing: not inside, or admitted after the release",
                extra={"gate": each.gate, "execution": each.execution_arn},
            )
