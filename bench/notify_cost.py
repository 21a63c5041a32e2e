"""Does the capture trigger's NOTIFY serialise writers? Commit throughput with and without it.

The trigger notifies only while the relay sleeps (`relay_wakeup.sleeping`); this flips that flag to
compare a relay that always needs waking with one that is polling.

    python -m bench.notify_cost [--database-url URL] [--writers 8] [--seconds 5] [--rounds 3]

Each writer commits single-row UPDATEs of `jobs` as fast as it can (autocommit, the capture trigger on);
rounds alternate NOTIFY on and off so both see the same machine load. Reports commits/s
and the ratio off/on. Without a URL it uses the machine's PostgreSQL, or an embedded one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg

from gateway.store.migrate import migrate

from . import sql


async def _setup(admin: str) -> str:
    db = await asyncpg.connect(admin)
    name = f"gwbench_notify_{os.getpid()}"
    await db.execute(sql.drop_database(name))
    await db.execute(sql.create_database(name))
    await db.close()
    url = admin.rsplit("/", 1)[0] + f"/{name}" if "?" not in admin else admin.replace("/postgres?", f"/{name}?")
    await migrate(url)
    db = await asyncpg.connect(url)
    await db.execute(sql.NOTIFY_COST_WORLD)
    await db.execute(sql.NOTIFY_COST_JOBS)
    await db.close()
    return url


async def _round(url: str, writers: int, seconds: float, notify: bool) -> float:
    conns = [await asyncpg.connect(url) for _ in range(writers)]
    await conns[0].execute(sql.RELAY_SLEEPING, notify)
    stop = time.monotonic() + seconds
    counts = [0] * writers

    async def write(i: int) -> None:
        rng = random.Random(i)
        while time.monotonic() < stop:
            await conns[i].execute(sql.FLIP_QUEUED, rng.randint(1, 10000))
            counts[i] += 1

    await asyncio.gather(*(write(i) for i in range(writers)))
    for c in conns:
        await c.close()
    return sum(counts) / seconds


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    admin = args.database_url
    embedded = None
    try:
        await (await asyncpg.connect(admin, timeout=3)).close()
    except (TimeoutError, OSError, asyncpg.PostgresError):
        from gateway.embedded import EmbeddedPostgres

        embedded = EmbeddedPostgres(Path(tempfile.mkdtemp()))
        admin = embedded.start()
    url = await _setup(admin)
    on: list[float] = []
    off: list[float] = []
    for _ in range(args.rounds):
        on.append(await _round(url, args.writers, args.seconds, notify=True))
        off.append(await _round(url, args.writers, args.seconds, notify=False))
    print(f"writers={args.writers} rounds={args.rounds} x {args.seconds}s")
    print(f"  NOTIFY on : {statistics.median(on):8.0f} commits/s  (rounds: {', '.join(f'{x:.0f}' for x in on)})")
    print(f"  NOTIFY off: {statistics.median(off):8.0f} commits/s  (rounds: {', '.join(f'{x:.0f}' for x in off)})")
    print(f"  off/on ratio: {statistics.median(off) / statistics.median(on):.2f}")
    if embedded is not None:
        embedded.stop()


if __name__ == "__main__":
    asyncio.run(main())
