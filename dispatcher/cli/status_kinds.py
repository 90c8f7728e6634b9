"""Every kind's part of `dispatcher status`, registered once (in `dispatcher.core.kinds.KINDS`' order)."""

from __future__ import annotations

from collections.abc import Callable

from dispatcher.cli.gate_status import read_gates
from dispatcher.cli.kind_status import KindStatus, StatusRead
from dispatcher.cli.lane_status import read_lanes

STATUS_KINDS: tuple[Callable[[StatusRead], KindStatus], ...] = (read_lanes, read_gates)
"""Each kind's reader: the primary one (lane) first."""
