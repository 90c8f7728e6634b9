"""Every kind's part of `dispatcher status`, registered once (in `dispatcher.core.kinds.KINDS`' order)."""

from __future__ import annotations

from dispatcher.cli.gate_status import gate_rosters, read_gates
from dispatcher.cli.kind_status import CliKind
from dispatcher.cli.lane_status import lane_rosters, read_lanes

CLI_KINDS: tuple[CliKind, ...] = (CliKind(read_lanes, lane_rosters), CliKind(read_gates, gate_rosters))
"""Each kind's part of `status` and ``status --groups``: the primary one (lane) first."""
