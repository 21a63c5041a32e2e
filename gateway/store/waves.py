"""A trajectory's waves of work in PostgreSQL (`trajectory_waves`): started, closed, restored after a takeover.

The relay records when a trajectory's wave starts and when its finish (notice, glow) has been published, so
that its successor finishes the open ones it could not and never repeats a closed one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ..core.control import KILLED
from ..core.finish import MAX_WAVE_SUBMISSIONS
from ..core.status import ACTIVE


@dataclass
class WaveFacts:
    """What a wave's jobs did so far: its finish notice says so (gateway.core.finish)."""

    analysis: bool
    rasterize: bool
    failed: bool
    stopped: bool  # a person removed or killed some of its active jobs: it ends silently
    submissions: set[int]  # whose work it was


async def load(db: asyncpg.Connection) -> list[asyncpg.Record]:
    """Every trajectory's latest wave (`trajectory_id`, `wave`, `open`, `started_at`, `closed_at`); read inside
    the relay's snapshot transaction."""
    return await db.fetch("select trajectory_id, wave, open, started_at, closed_at from trajectory_waves")


async def facts(db: asyncpg.Connection, trajectory_id: int, started_at: datetime | None) -> WaveFacts:
    """What the trajectory's jobs changed since its wave started (None: ever). A job removed while it was still at work, or
    killed, stopped the wave's work (`core.finish.cuts_short`): what the table keeps of it is its status at
    removal, or the killed task's error."""
    row = await db.fetchrow(
        "select coalesce(bool_or(kind = 'analysis'), false) as analysis,"
        " coalesce(bool_or(kind = 'rasterize'), false) as rasterize,"
        " coalesce(bool_or(status in ('failed', 'preempted') and error is distinct from $3), false) as failed,"
        " coalesce(bool_or((removed_at is not null and status = any($4::text[]))"
        "   or (status = 'failed' and error = $3)), false) as stopped,"
        " array(select distinct s from unnest(array_agg(submission_id)) s where s is not null"
        f"   limit {MAX_WAVE_SUBMISSIONS}) as submissions"
        " from jobs where trajectory_id = $1 and ($2::timestamptz is null or updated_at >= $2)",
        trajectory_id,
        started_at,
        KILLED,
        sorted(ACTIVE),
    )
    return WaveFacts(row["analysis"], row["rasterize"], row["failed"], row["stopped"], set(row["submissions"]))


async def record_started(db: asyncpg.Connection, started: list[tuple[int, int, datetime | None]]) -> None:
    """Waves that started (trajectory, wave number, its first change's time; now when unknown): open."""
    await db.execute(
        "insert into trajectory_waves (trajectory_id, wave, open, started_at)"
        " select t, w, true, coalesce(s, now()) from unnest($1::bigint[], $2::int[], $3::timestamptz[]) as u(t, w, s)"
        " where exists (select 1 from trajectories where id = t)"
        " on conflict (trajectory_id) do update set wave = excluded.wave, open = true, started_at = excluded.started_at",
        [t for t, _, _ in started],
        [w for _, w, _ in started],
        [s for _, _, s in started],
    )


async def record_closed(db: asyncpg.Connection, waves: list[tuple[int, int]]) -> None:
    """Waves (trajectory, wave number) whose finish has been published: closed."""
    await db.execute(
        "update trajectory_waves w set open = false, closed_at = now() from unnest($1::bigint[], $2::int[]) as u(t, n)"
        " where w.trajectory_id = u.t and w.wave = u.n",
        [t for t, _ in waves],
        [n for _, n in waves],
    )
