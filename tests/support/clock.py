"""A running frozen clock moved on from where it is now."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any


def advance(frozen: Any, seconds: float) -> None:
    """Move a ticking `freeze_time` clock ``seconds`` on from now.

    freezegun's own ``tick(seconds)`` on a ticking clock moves on from where the clock was
    last set and drops the real time that ran since: on a busy machine, a tick that took
    more than a second left the clock short of an age the test meant to pass.
    """
    frozen.move_to(datetime.fromtimestamp(time.time() + seconds, UTC))
