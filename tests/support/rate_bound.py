"""A lane's start rate as an observer checks it: at most ``b + r·t`` starts in any window of t seconds."""

from __future__ import annotations

import math
from collections.abc import Sequence


def worst_window_excess(moments: Sequence[float], per_second: float) -> float:
    """The most starts any window held, less ``r·t`` for its length t: at most ``b`` while the bucket holds.

    Over the starts i..j (sorted), (j - i + 1) - r·(t_j - t_i); the maximum over every
    pair, in one pass: (j + 1 - r·t_j) less the least (i - r·t_i) before it.
    """
    worst, least = -math.inf, math.inf
    for index, moment in enumerate(sorted(moments)):
        least = min(least, index - per_second * moment)
        worst = max(worst, index + 1 - per_second * moment - least)
    return worst
