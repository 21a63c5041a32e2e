"""Noting that a cluster was heard from (any request with its key: a job report, metrics, a submission), so that
one that stops reporting is known to be silent (gateway.store.clusters.mark_silent).

Each node writes a cluster's `heard_at` at most once every `every` seconds (a cluster reports several times a
second), and at once when the cluster was silent: its jobs show their own statuses again before its request is
handled.
"""

from __future__ import annotations

import time

from ...store import clusters
from ...store.types import Pool


class Hearing:
    def __init__(self, silent_after: float) -> None:
        self.every = max(0.5, min(10.0, silent_after / 6))  # well inside the silence limit
        self._written: dict[int, float] = {}  # cluster id -> when this node last wrote its heard_at (monotonic)

    def due(self, cluster_id: int, silent: bool, now: float) -> bool:
        if silent:
            return True
        written = self._written.get(cluster_id)
        return written is None or now - written >= self.every

    async def heard(self, pool: Pool, cluster_id: int, silent: bool) -> None:
        now = time.monotonic()
        if self.due(cluster_id, silent, now):
            self._written[cluster_id] = now  # keyed by checked cluster ids: as many entries as clusters
            await clusters.heard(pool, cluster_id)
