"""The demo's job producer: uploads and analyses moving through their statuses, written with plain SQL.

It writes the way the platform's own SQL does, so the demo also shows that any writer is captured.
(The cluster simulator, which talks to the gateway as a real cluster would, comes with the control work.)
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import asyncpg

log = logging.getLogger(__name__)

PLUGINS = ["Polyhedral Template Matching", "Radial Distribution Function", "Common Neighbor Analysis"]


async def run_producer(dsn: str, team_id: int, frames: int = 40, pace: float = 1.0, seed: int | None = None) -> None:
    """Run waves of work on the team's trajectories until cancelled."""
    rng = random.Random(seed)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    try:
        trajectories = [r["id"] for r in await pool.fetch("select id from trajectories where team_id = $1", team_id)]
        clusters = [r["id"] for r in await pool.fetch("select id from clusters where team_id = $1", team_id)]
        waves: set[asyncio.Task[None]] = set()
        while True:
            if len(waves) < 3:
                task = asyncio.create_task(_wave(pool, rng, team_id, rng.choice(trajectories), rng.choice(clusters), frames, pace))
                waves.add(task)
                task.add_done_callback(waves.discard)
            await asyncio.sleep(rng.uniform(2, 5) * pace)
    finally:
        for task in list(waves):
            task.cancel()
        await pool.close()


async def _wave(pool: asyncpg.Pool, rng: random.Random, team_id: int, trajectory_id: int, cluster_id: int, frames: int, pace: float) -> None:
    analysis = rng.random() < 0.5
    rows: list[tuple[Any, ...]]
    if analysis:
        plugin = rng.choice(PLUGINS)
        analysis_id = await pool.fetchval(
            "insert into analyses (trajectory_id, plugin) values ($1, $2) returning id", trajectory_id, plugin
        )
        rows = [(team_id, trajectory_id, cluster_id, analysis_id, "analysis", plugin, f, f * 10.0) for f in range(frames)]
    else:
        rows = [(team_id, trajectory_id, cluster_id, None, "preprocess", "Preprocess trajectory frame", f, f * 10.0) for f in range(frames)]
        rows.append((team_id, trajectory_id, cluster_id, None, "rasterize", "Rasterize trajectory preview", None, None))
    ids = [
        r["id"]
        for r in await pool.fetch(
            "insert into jobs (team_id, trajectory_id, cluster_id, analysis_id, kind, name, frame, timestep)"
            " select * from unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::int[], $8::float8[])"
            " returning id",
            *[list(col) for col in zip(*rows)],
        )
    ]
    workers = 4
    pending = list(ids)
    attempts = {job_id: 1 for job_id in ids}
    while pending:
        running, pending = pending[:workers], pending[workers:]
        await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", running)
        await asyncio.sleep(rng.uniform(0.3, 1.2) * pace)
        for job_id in running:
            if rng.random() < 0.06:
                if attempts[job_id] < 3:
                    attempts[job_id] += 1
                    await pool.execute(
                        "update jobs set status = 'retrying', attempts = $2 where id = $1", job_id, attempts[job_id]
                    )
                    pending.append(job_id)
                else:
                    await pool.execute(
                        "update jobs set status = 'failed', error = 'worker exited with code 137 (out of memory)' where id = $1",
                        job_id,
                    )
            else:
                await pool.execute("update jobs set status = 'completed', error = null where id = $1", job_id)
