"""What CSV exports cost everyone else on a node: /healthz through concurrent full-speed exports, and another
team's calls through exports whose readers read nothing.

    python -m bench.exports [--submissions 100000] [--exports 8] [--stalled 10] [--calls 40] [--out PATH]

One team holds N submissions (bench.views' team: several members, analysis tasks on some); a second team has
one member and nothing else. Measured on one node (its relay beside it), each phase reported, never judged:

- full speed: `--exports` exports of the whole team read at once as fast as this process takes them, from as many
  members (two exports each), while a process of its own polls /healthz 20 times a second: /healthz's p50, p99
  and peak over the exports, against the same before them; each export's seconds and bytes (the issue's target:
  /healthz under 100 ms at the p99 through eight exports of 100,000 rows);
- stalled: `--stalled` exports from sockets with a 4 KB receive window that read nothing (two per member), and
  the second team's `/api/teams/<id>/members` and `/submissions` timed `--calls` times each: before, while the
  node still renders what the kernel's send buffers take, and once it is quiet (every export waiting on its
  reader).

Writes `--out` (bench/results/exports.json), with the commit and the date.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import secrets
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from gateway.web.people.auth import issue_token

from . import sql
from .healthz import HealthProbe, latency_figures
from .infra import start_infra
from .systems import SYSTEMS, Context
from .views.common import percentile
from .views.team import populate, wait_saved


def _say(message: str) -> None:
    print(f"[exports] {message}", flush=True)


async def _member_tokens(pool: asyncpg.Pool, secret: str, team_id: int, count: int) -> list[str]:
    ids = await pool.fetch(sql.NEW_READERS, count, secrets.token_hex(3))
    await pool.execute(sql.NEW_MEMBERSHIPS, team_id, [r["id"] for r in ids])
    return [issue_token(secret, r["id"], 3600) for r in ids]


async def _export(base: str, team_id: int, token: str) -> tuple[float, int, int]:
    started = time.monotonic()
    size = 0
    async with httpx.AsyncClient(base_url=base, timeout=300) as client:
        async with client.stream(
            "GET", f"/api/teams/{team_id}/submissions.csv", headers={"Authorization": f"Bearer {token}"}
        ) as response:
            async for chunk in response.aiter_raw():
                size += len(chunk)
    return time.monotonic() - started, size, response.status_code


async def _stall(port: int, team_id: int, token: str) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(s, ("127.0.0.1", port))
    request = f"GET /api/teams/{team_id}/submissions.csv HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    await loop.sock_sendall(s, f"{request}Authorization: Bearer {token}\r\n\r\n".encode())
    await asyncio.wait_for(loop.sock_recv(s, 64), 60)  # the answer began; nothing more is read
    return s


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _quiet(pid: int, timeout: float = 120) -> float:
    """Seconds until the node uses under a tenth of a core over a second (its exports all wait on readers)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = _cpu_seconds(pid)
        await asyncio.sleep(1)
        if _cpu_seconds(pid) - before < 0.1:
            break
    return round(time.monotonic() - started, 1)


async def _calls(base: str, team_id: int, token: str, count: int) -> dict[str, Any]:
    """The second team's two calls, `count` times each, one after another: p50, p95 and peak (ms), and failures."""
    took: list[float] = []
    failed = 0
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        for i in range(count * 2):
            path = f"/api/teams/{team_id}/{'members' if i % 2 == 0 else 'submissions'}"
            started = time.perf_counter()
            try:
                response = await client.get(path, headers={"Authorization": f"Bearer {token}"})
                failed += response.status_code != 200
            except httpx.HTTPError:
                failed += 1
            took.append((time.perf_counter() - started) * 1000)
    return {
        "load_average": round(os.getloadavg()[0], 1),  # the machine's: other work slows every figure here
        "calls": len(took),
        "failed": failed,
        "p50_ms": round(percentile(took, 50) or 0, 1),
        "p95_ms": round(percentile(took, 95) or 0, 1),
        "max_ms": round(max(took), 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    record: dict[str, Any] = {
        "benchmark": "exports",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "submissions": args.submissions,
        "machine": {"cpus": os.cpu_count()},
    }
    with tempfile.TemporaryDirectory(prefix="bench-exports-") as tmp:
        infra = await start_infra(Path(tmp))
        pool = await asyncpg.create_pool(infra.database_url, min_size=1, max_size=4)
        (Path(tmp) / "logs").mkdir()
        ctx = Context(infra.database_url, infra.redis_url, secrets.token_urlsafe(32), Path(tmp) / "logs")
        os.environ["GATEWAY_HTTP_RATE"] = "0"  # the second team's calls come back to back
        os.environ["GATEWAY_MAX_EXPORTS"] = str(max(args.exports, args.stalled))  # every reader let in
        gateway = SYSTEMS["gateway"].start(ctx)
        base = f"http://127.0.0.1:{gateway.port}"
        try:
            team = await populate(pool, ctx.secret, args.submissions, _say)
            await wait_saved(pool, team, _say, timeout=max(120.0, args.submissions / 100))
            from harness.teams import make_team

            other = await make_team(pool, ctx.secret)
            readers = await _member_tokens(pool, ctx.secret, team.id, max(args.exports, args.stalled) // 2 + 1)

            probe = HealthProbe(base)
            await asyncio.sleep(3)  # a baseline of /healthz with nothing else running
            began = time.time()
            _say(f"{args.exports} exports at full speed")
            results = await asyncio.gather(*(_export(base, team.id, readers[i // 2]) for i in range(args.exports)))
            ended = time.time()
            samples = await probe.stop()
            record["full_speed"] = {
                "exports": [{"s": round(s, 2), "bytes": size, "status": status} for s, size, status in results],
                "healthz_before": latency_figures(samples, 0, began),
                "healthz_during": latency_figures(samples, began, ended),
            }
            _say(f"/healthz during: {record['full_speed']['healthz_during']}")

            before = await _calls(base, other.id, other.token, args.calls)
            opened = [await _stall(gateway.port, team.id, readers[i // 2]) for i in range(args.stalled)]
            try:
                # While the node renders what the kernel's send buffers still take (some 2.8 MB a socket on
                # loopback), then once that is full and every export waits on its reader.
                filling = await _calls(base, other.id, other.token, args.calls)
                quiet = await _quiet(gateway.node_pids[0])
                during = await _calls(base, other.id, other.token, args.calls)
            finally:
                for s in opened:
                    s.close()
            await _quiet(gateway.node_pids[0])
            after = await _calls(base, other.id, other.token, args.calls)  # the control: the same calls, no readers
            record["stalled"] = {
                "readers": args.stalled,
                "calls_before": before,
                "calls_while_buffers_fill": filling,
                "node_quiet_after_s": quiet,
                "calls_once_stalled": during,
                "calls_after": after,
            }
            _say(f"another team's calls before {before}, while filling {filling}, once stalled {during}, after {after}")
        finally:
            gateway.stop()
            await pool.close()
            await infra.close()
    return record


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.exports", description=__doc__.split("\n")[0])
    parser.add_argument("--submissions", type=int, default=100_000)
    parser.add_argument("--exports", type=int, default=8)
    parser.add_argument("--stalled", type=int, default=10)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("bench/results/exports.json"))
    args = parser.parse_args()
    record = asyncio.run(run(args))
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
