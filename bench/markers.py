"""Markers: one job per trajectory that the load never touches, moved on purpose to tell when every subscriber is
current. A mark commits every marker's change as soon as the database takes the write; a subscriber holds it once
its trajectory panel shows the marker's new version, or its team channel counts the markers at their new status
(bench.subscribers: `Fleet.until`). `bench faults` marks right after a fault, `bench deploy` once a node has
left; what every subscriber must finally hold (`expected`) is read from the database."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import asyncpg

from . import sql
from .load import World as Jobs
from .load import database_state, team_counts

STATUSES = ("holding", "preempted")  # the markers' statuses: the load only cycles queued/running/completed
DB_DOWN = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)  # a broken connection, in its forms


@dataclass
class Markers:
    pool: asyncpg.Pool
    jobs: Jobs
    probes: dict[int, int]  # trajectory -> its marker job (not in `jobs`: the load never touches it)
    marks: int = 0

    @classmethod
    async def add(cls, pool: asyncpg.Pool, jobs: Jobs) -> Markers:
        """A marker job in every trajectory of `jobs`."""
        probes = {}
        for team, trajectories in jobs.trajectories.items():
            for trajectory in trajectories:
                probes[trajectory] = await pool.fetchval(sql.NEW_MARKERS, team, trajectory, STATUSES[0])
        return cls(pool, jobs, probes)

    async def mark(self, channels: set[str]) -> dict[str, tuple[str, Any, int]]:
        """Move every marker job to the next marker status, as soon as the database takes the write; what a
        subscriber of each channel holds once it has that change (see Fleet.until)."""
        self.marks += 1
        status = STATUSES[self.marks % 2]
        deadline = time.monotonic() + 60
        while True:
            try:
                rows = await self.pool.fetch(sql.MOVE_MARKERS, list(self.probes.values()), status)
                break
            except DB_DOWN:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        marks: dict[str, tuple[str, Any, int]] = {
            f"trajectory:{r['trajectory_id']}": ("job", r["id"], r["version"]) for r in rows
        }
        for team in self.jobs.teams:
            marks[f"team:{team}"] = ("count", status, len(self.jobs.trajectories[team]))
        return {c: m for c, m in marks.items() if c in channels}

    async def expected(self) -> dict[str, Any]:
        """What every subscriber must end with: its team's counts, its trajectory's jobs."""
        want: dict[str, Any] = {}
        for team in self.jobs.teams:
            want[f"team:{team}"] = await team_counts(self.pool, team)
            for trajectory in self.jobs.trajectories[team]:
                want[f"trajectory:{trajectory}"] = await database_state(self.pool, trajectory)
        return want
