"""How long a kind of job takes on a cluster: the running mean of completed jobs' durations, trusted once enough
completed (gateway.core.eta estimates time left from it)."""

from __future__ import annotations

import math

MIN_SAMPLES = 5  # completed jobs of a kind on a cluster before its duration there is trusted
MEAN_OF_FIRST = 10  # the first samples are averaged plainly; later ones weigh WEIGHT each
WEIGHT = 0.1


class Durations:
    """Per cluster and kind, the running mean of completed jobs' durations and how many made it."""

    __slots__ = ("_of",)

    def __init__(self) -> None:
        self._of: dict[tuple[int, str], list[float]] = {}  # (cluster, kind) -> [samples, mean]

    def observe(self, cluster: int, kind: str, seconds: float) -> None:
        if not (seconds >= 0.0 and math.isfinite(seconds)):
            return  # a clock step or a bad timestamp: no sample
        entry = self._of.get((cluster, kind))
        if entry is None:
            self._of[(cluster, kind)] = [1.0, seconds]
            return
        entry[0] += 1.0
        entry[1] += (seconds - entry[1]) * max(WEIGHT, 1.0 / min(entry[0], MEAN_OF_FIRST))

    def seed(self, cluster: int, kind: str, samples: int, mean: float) -> None:
        """Start from what the database says recent jobs took (a relay's takeover)."""
        if samples > 0 and mean >= 0.0 and math.isfinite(mean):
            self._of[(cluster, kind)] = [float(samples), mean]

    def mean(self, cluster: int, kind: str) -> float | None:
        """The mean duration, or None until MIN_SAMPLES jobs completed."""
        entry = self._of.get((cluster, kind))
        return entry[1] if entry is not None and entry[0] >= MIN_SAMPLES else None

    def samples(self, cluster: int, kind: str) -> int:
        entry = self._of.get((cluster, kind))
        return int(entry[0]) if entry is not None else 0
