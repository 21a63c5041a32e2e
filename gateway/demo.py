"""`gateway demo`: the whole product on one machine, with embedded servers when no URLs are given."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from pathlib import Path

import uvicorn

from .config import Settings
from .embedded import EmbeddedPostgres, EmbeddedValkey
from .relay.runner import Relay
from .seed import seed_demo
from .sim.run import Simulation
from .store.migrate import migrate
from .web.app import create_app
from .web.auth import issue_token

log = logging.getLogger("gateway.demo")


async def run_demo(settings: Settings, host: str, port: int, data: Path) -> None:
    started: list[EmbeddedPostgres | EmbeddedValkey] = []
    try:
        if not settings.database_url:
            pg = EmbeddedPostgres(data.resolve())
            started.append(pg)
            settings.database_url = await asyncio.to_thread(pg.start)
        if not settings.redis_url:
            valkey = EmbeddedValkey(data.resolve() / "valkey")
            started.append(valkey)
            settings.redis_url = await asyncio.to_thread(valkey.start)
        settings.secret = settings.secret or secrets.token_urlsafe(32)
        settings.demo = True
        await migrate(settings.database_url)
        seeded = await seed_demo(settings.database_url)

        from .cli import uvicorn_config

        server = uvicorn.Server(uvicorn_config(create_app(settings), settings, host, port, log_level="warning"))
        relay = Relay(
            settings.database_url,
            settings.redis_url,
            job_retention=settings.job_retention,
            presence=not settings.single_user,
            metrics=not settings.local,
            cluster=settings.redis_cluster,
            partitions=settings.partitions,
        )
        tasks = [
            asyncio.create_task(server.serve(), name="web"),
            asyncio.create_task(relay.run(), name="relay"),
        ]
        while not server.started:
            await asyncio.sleep(0.05)
        # The team's clusters at work, talking to the gateway as real clusters do (gpu-2 never confirms).
        simulation = Simulation(
            f"http://{host}:{port}",
            settings.redis_url,
            [seeded.cluster_keys[c] for c in seeded.cluster_ids],
            silent={seeded.cluster_ids[1]},
            trajectories=seeded.trajectory_ids,
            redis_cluster=settings.redis_cluster,
        )
        tasks.append(asyncio.create_task(simulation.run(), name="simulator"))
        token = issue_token(settings.secret, seeded.user_ids[0], settings.token_ttl)
        print(
            "\n  Jobs gateway demo is running\n"
            f"  open        http://{host}:{port}/?token={token}\n"
            f"  DATABASE_URL={settings.database_url}\n"
            f"  REDIS_URL={settings.redis_url}\n"
            f"  GATEWAY_SECRET={settings.secret}\n"
            f"  cluster key ({seeded.cluster_ids[0]}): {seeded.cluster_keys[seeded.cluster_ids[0]]}\n"
            "  Ctrl-C stops everything it started.\n",
            flush=True,
        )
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a part that died takes the demo down with its error
        finally:
            server.should_exit = True
            for task in tasks[1:]:
                task.cancel()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
    finally:
        for service in reversed(started):
            await asyncio.to_thread(service.stop)
