"""A gate's ports: its roster (admissions confirmed, and released by any invocation), `SendTaskSuccess`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dispatcher.core.kinds.gate import Gate
from dispatcher.tick.ports import Executions, MemberPorts, Roster


class TaskTokens(Protocol):
    """What admits an execution waiting at a gate: `SendTaskSuccess` with its task token."""

    def succeed(self, token: str, output: str) -> None:
        """Complete the token's task with ``output``. `TokenRefusedError` when its task is closed."""
        ...


class GateRoster(Roster, Protocol):
    """A gate's roster: its admissions are confirmed once taken, and any invocation may release one."""

    def confirm(self, gate: Gate, names: Sequence[str], now: float) -> None:
        """Note that `SendTaskSuccess` took these admissions into ``gate`` (raises when not written)."""
        ...

    def release(self, gate: Gate, name: str, sent_at: float) -> bool:
        """Free execution ``name``'s place in ``gate`` if admitted before ``sent_at``; whether it was."""
        ...


@dataclass(frozen=True)
class GatePorts(MemberPorts):
    """One gate's resources: its request queue and DLQ, its state machine (checked), the task tokens."""

    state_machine: Executions
    """The gated state machine: what Step Functions says of an execution inside."""
    tokens: TaskTokens
    admissions: GateRoster
    """Its roster (the same as ``roster``), with what only a gate's has."""
