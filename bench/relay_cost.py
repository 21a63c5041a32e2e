"""What a job change costs the relay, and how partitions spread it (for docs/scaling.md).

    python -m bench.relay_cost [--changes 60000] [--layouts 1x1,4x2]
    python -m bench.relay_cost --pace 0,5,20,50 [--seconds 10]

A layout PxR runs R relay processes sharing P partitions. Four writers commit about `changes` job updates
in transactions of 50 over 20 teams as fast as PostgreSQL takes them; the run ends when the relays' published
change counts (their stats in Redis) have caught up. Reported: relay CPU per change from /proc (all relay
processes together), the outbox reads' CPU per change (the PostgreSQL backends of the relays' outbox
connections: what reading each partition's rows costs the database; read to the nanosecond from schedstat, as
a tenth of a second spread over nine backends is too little for /proc's 10 ms ticks), and changes published per
second of wall time (the relays keeping up or not); from the relays' /metrics, their cycles, the partitions'
outbox reads, and the statements those reads took (a process's partitions may read in one:
gateway.store.joint_reads).
`--layouts 1x1,2x1,4x1,8x1` shows how the read cost grows with P.

`--pace` measures the other end, what a commit costs a relay at a slow, steady pace (fanout's 5 and 20 commits
a second): one relay, one trajectory, commits of 5 changes each at each given rate (0: the relay idle), the
relay's CPU per second and per commit. At a slow pace every commit is a cycle of its own (wake-up, read,
publish), so this is the relay's fixed cost per cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import asyncpg
from prometheus_client.parser import text_string_to_metric_families

from gateway.bus.broker import RedisBroker
from gateway.embedded import free_port

from . import sql
from .infra import start_infra
from .load import build_world
from .procstat import cpu_seconds, exact_cpu_seconds

TEAMS = 20
BATCH = 50


async def _published(broker: RedisBroker) -> int:
    """The changes the partitions' relays have published, by their figures in Redis."""
    return sum(s.changes for s in await broker.relay_stats.read(broker.partitions.tags) if s is not None)


async def _settled(broker: RedisBroker) -> int:
    """The relays' count once it stops moving (they caught up with the setup's inserts)."""
    last, since = -1, time.monotonic()
    while True:
        now = await _published(broker)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > 2.5 and now > 0:
            return now
        await asyncio.sleep(0.2)


COUNTERS = (
    "gateway_relay_cycles_total",
    "gateway_relay_outbox_reads_total",
    "gateway_relay_joint_reads_total",
    "gateway_relay_joint_read_partitions_total",
)


def _relay_counters(ports: list[int]) -> dict[str, float]:
    """The relays' cycle and read counters, summed over processes and partitions, from their /metrics (a tree
    without the reads counter read on every cycle: reads are then its cycles)."""
    totals: dict[str, float] = {}
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                # A tree from before the rename (2026-12-05) exports them as relay_*: compared all the same.
                name = sample.name if sample.name.startswith("gateway_") else f"gateway_{sample.name}"
                if name in COUNTERS:
                    totals[name] = totals.get(name, 0.0) + sample.value
    totals.setdefault("gateway_relay_outbox_reads_total", totals.get("gateway_relay_cycles_total", 0.0))
    return {name: totals.get(name, 0.0) for name in COUNTERS}


async def _outbox_backends(pool: asyncpg.Pool) -> list[int]:
    """The PostgreSQL backends of the relays' outbox connections (what reading the outbox costs the database)."""
    return [r["pid"] for r in await pool.fetch(sql.OUTBOX_BACKENDS)]


async def run_layout(
    database_url: str, redis_url: str, count: int, relays: int, changes: int, logdir: Path
) -> dict[str, object]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "GATEWAY_PARTITIONS": str(count),
        "GATEWAY_LOG_LEVEL": "warning",
    }
    procs = []
    ports = [free_port() for _ in range(relays)]
    for i in range(relays):
        with open(logdir / f"relay-{count}x{relays}-{i}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "gateway.cli", "relay"],
                    env={**env, "GATEWAY_RELAY_METRICS_PORT": str(ports[i])},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    pool = await asyncpg.create_pool(database_url, min_size=4, max_size=4)
    broker = RedisBroker.connect(redis_url, partitions=count)
    try:
        world = await build_world(pool, TEAMS, 2, 250)
        ids = [j for jobs in world.jobs.values() for j in jobs]
        base = await _settled(broker)
        first = await pool.fetchval(sql.LAST_CHANGE)
        counters0 = await asyncio.to_thread(_relay_counters, ports)  # scraped outside the CPU measured
        read0 = {pid: exact_cpu_seconds(pid) for pid in await _outbox_backends(pool)}
        cpu0 = cpu_seconds(p.pid for p in procs)
        started = time.monotonic()

        async def write(seed: int, n: int) -> None:
            rng = random.Random(seed)
            statuses = ["queued", "running", "completed"]
            for _ in range(n // BATCH):
                async with pool.acquire() as db:
                    await db.execute(
                        sql.SET_STATUS_LOCKED,
                        rng.sample(ids, BATCH),
                        rng.choice(statuses),
                    )

        await asyncio.gather(*(write(s, changes // 4) for s in range(4)))
        written = time.monotonic() - started
        # An update that leaves a job as it was captures nothing: count what the outbox got.
        target = base + await pool.fetchval(sql.CHANGES_SINCE, first)
        while await _published(broker) < target and time.monotonic() - started < 300:
            await asyncio.sleep(0.05)
        took = time.monotonic() - started
        cpu = cpu_seconds(p.pid for p in procs) - cpu0
        # A backend that came meanwhile (the joint reads' connection is opened on the first joint read) counts whole.
        readers = await _outbox_backends(pool)
        read_cpu = sum(exact_cpu_seconds(pid) - read0.get(pid, 0.0) for pid in readers)
        done = await _published(broker) - base
        counters = await asyncio.to_thread(_relay_counters, ports)
        cycles, reads, joint, joined = (counters[name] - counters0[name] for name in COUNTERS)
        statements = reads - joined + joint  # the reads made alone, and the joint statements
        return {
            "partitions": count,
            "relays": relays,
            "changes": done,
            "write_seconds": round(written, 2),
            "publish_seconds": round(took, 2),
            "changes_per_s": round(done / took),
            "relay_cpu_s": round(cpu, 2),
            "relay_cpu_us_per_change": round(cpu * 1e6 / done, 1) if done else None,
            "outbox_readers": len(readers),
            "read_cpu_s": round(read_cpu, 3),
            "read_cpu_us_per_change": round(read_cpu * 1e6 / done, 1) if done else None,
            "cycles": int(cycles),
            "partition_reads": int(reads),
            "read_statements": int(statements),
            "changes_per_statement": round(done / statements, 1) if statements else None,
        }
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
        await broker.bus.redis.flushall()  # the next layout starts from an empty bus
        await broker.aclose()
        await pool.close()


async def run_pace(
    database_url: str, redis_url: str, rates: list[float], seconds: float, logdir: Path
) -> list[dict[str, object]]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "GATEWAY_LOG_LEVEL": "warning",
        "GATEWAY_RELAY_METRICS_PORT": str(port),
    }
    with open(logdir / "relay-pace.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "relay"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    broker = RedisBroker.connect(redis_url)
    rows: list[dict[str, object]] = []
    try:
        world = await build_world(pool, 1, 1, 200)
        ids = next(iter(world.jobs.values()))
        while (await broker.relay_stats.read(broker.partitions.tags))[0] is None:  # until the relay serves
            await asyncio.sleep(0.1)
        await asyncio.sleep(2.0)
        statuses = ["queued", "running", "completed"]
        for rate in rates:
            counters0 = await asyncio.to_thread(_relay_counters, [port])  # scraped outside the CPU measured
            cpu0, started, commits = cpu_seconds([proc.pid]), time.monotonic(), 0
            while time.monotonic() - started < seconds:
                if rate:
                    await pool.execute(
                        sql.SET_STATUS,
                        random.sample(ids, 5),
                        statuses[commits % 3],
                    )
                    commits += 1
                    await asyncio.sleep(max(0.0, started + commits / rate - time.monotonic()))
                else:
                    await asyncio.sleep(seconds)
            await asyncio.sleep(0.3)  # the last commit's cycle
            cpu = cpu_seconds([proc.pid]) - cpu0
            took = time.monotonic() - started
            counters = await asyncio.to_thread(_relay_counters, [port])
            cycles, reads = (
                counters[n] - counters0[n] for n in ("gateway_relay_cycles_total", "gateway_relay_outbox_reads_total")
            )
            rows.append(
                {
                    "commits_per_s": rate,
                    "commits": commits,
                    "relay_cpu_ms_per_s": round(cpu * 1e3 / took, 2),
                    "relay_cpu_us_per_commit": round(cpu * 1e6 / commits) if commits else None,
                    # At a slow pace one cycle and one read a commit; more are wake-ups for what is due (a
                    # team's summary, a held window) or cycles that found nothing to do.
                    "cycles_per_s": round(cycles / took, 1),
                    "reads_per_s": round(reads / took, 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
        await broker.aclose()
        await pool.close()
    return rows


async def pace(rates: list[float], seconds: float) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        infra = await start_infra(Path(tmp))
        try:
            return await run_pace(infra.database_url, infra.redis_url, rates, seconds, Path(tmp))
        finally:
            await infra.close()


async def main(changes: int, layouts: list[tuple[int, int]]) -> list[dict[str, object]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for count, relays in layouts:
            infra = await start_infra(Path(tmp) / f"{count}x{relays}")  # a fresh database each time
            try:
                rows.append(await run_layout(infra.database_url, infra.redis_url, count, relays, changes, Path(tmp)))
            finally:
                await infra.close()
            print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.relay_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=60_000)
    parser.add_argument("--layouts", default="1x1,4x1,4x2", help="PxR: P partitions shared by R relay processes")
    parser.add_argument("--pace", help="commit rates (a second) for the slow-pace measure, e.g. 0,5,20,50")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each pace runs")
    args = parser.parse_args()
    if args.pace:
        asyncio.run(pace([float(r) for r in args.pace.split(",")], args.seconds))
        raise SystemExit
    asyncio.run(main(args.changes, [tuple(int(x) for x in layout.split("x")) for layout in args.layouts.split(",")]))  # type: ignore[misc]
