"""The scenarios: what load, how many subscribers, which systems, and what the run must show.

Each returns its record (`systems` with one object per system; runs at several sizes under `runs`), the
markdown tables, and a latency curve per system for the plots.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .burst import burst
from .common import Progress, Run, median_round
from .fanout import FANOUT_SIZES, fanout
from .steady import steady
from .storm import storm

__all__ = ["FANOUT_SIZES", "SCENARIOS", "Progress", "Run", "burst", "fanout", "median_round", "steady", "storm"]


SCENARIOS: dict[str, Callable[..., Awaitable[Run]]] = {
    "fanout": fanout,
    "storm": storm,
    "steady": steady,
    "burst": burst,
}
