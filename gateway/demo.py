"""`gateway demo`: the whole product on one machine, with embedded servers when no URLs are given.

It runs until cancelled (`gateway.running.run_until_signalled` turns Ctrl-C and SIGTERM into that), then stops its parts in the
order they depend on each other: the producer first (its requests still get answers), then the web server
and the relay, then the embedded servers they were using.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .config import MIN_SECRET_LENGTH, Settings
from .credentials import issue_token
from .embedded import EmbeddedPostgres, EmbeddedValkey
from .relay.metrics import RelayCollector
from .relay.runner import Relay
from .seed import Seeded, seed_demo
from .sim.run import Simulation
from .store.migrate import migrate
from .web.app import create_app
from .web.node.metrics import also_export
from .web.server.serve import Server
from .web.serving import listeners, node_server

log = logging.getLogger("gateway.demo")

T = TypeVar("T")

STOP_PRODUCER_WITHIN = 10.0  # the simulator lets its sent requests finish (5 s at most)
STOP_SERVERS_WITHIN = 10.0  # the web server's graceful shutdown (below) and the relay's
GRACEFUL_SHUTDOWN = 5  # the web server: open websockets and requests get this long before they are cut


class DemoError(RuntimeError):
    """A part of the demo could not start or stopped by itself: the demo ends, saying which."""


async def run_demo(
    settings: Settings, host: str, port: int, data: Path, speed: float = 1.0, seed: int | None = None
) -> None:
    started: list[EmbeddedPostgres | EmbeddedValkey] = []
    try:
        await _start_embedded(settings, data.resolve(), started)
        settings.secret = settings.secret or _kept_secret(data.resolve())
        settings.demo = True
        await migrate(settings.database_url)
        seeded = await seed_demo(settings.database_url, settings.secret)
        await _serve(settings, host, port, seeded, speed, seed)
    finally:
        for service in reversed(started):  # Valkey, then PostgreSQL
            try:
                await _to_the_end(service.stop)
            except Exception as exc:  # the next one must still be stopped
                log.warning("could not stop the embedded %s: %s", type(service).__name__, exc)


def _kept_secret(data: Path) -> str:
    """The secret the demo signs with, kept in its data folder (readable by its owner alone): a restart on the same
    folder signs as before, so open browsers and tools stay signed in."""
    path = data / "secret"
    if path.exists():
        kept = path.read_text().strip()
        if len(kept) >= MIN_SECRET_LENGTH:
            return kept
        log.warning("%s holds no usable secret: making a new one (open sessions must sign in again)", path)
    data.mkdir(parents=True, exist_ok=True)
    made = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(made + "\n")
    os.chmod(path, 0o600)  # a file left with other modes by hand: the owner's alone again
    return made


async def _start_embedded(settings: Settings, data: Path, started: list[EmbeddedPostgres | EmbeddedValkey]) -> None:
    """PostgreSQL and Valkey of our own for whichever URL is not set; `started` lists them for stopping."""
    if not settings.database_url:
        pg = EmbeddedPostgres(data)
        started.append(pg)
        settings.database_url = await _to_the_end(pg.start)
    if not settings.redis_url:
        valkey = EmbeddedValkey(data / "valkey")
        started.append(valkey)
        settings.redis_url = await _to_the_end(valkey.start)


async def _to_the_end(blocking: Callable[[], T]) -> T:
    """Run a server's start or stop in a thread, to its end even if cancelled meanwhile: a server left half
    started would outlive the demo."""
    done = asyncio.ensure_future(asyncio.to_thread(blocking))
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await done
        raise


async def _serve(settings: Settings, host: str, port: int, seeded: Seeded, speed: float, seed: int | None) -> None:
    """The web server, the relay and the simulated clusters, until cancelled or one of them stops."""
    app = create_app(settings)
    try:
        sockets = listeners(host, port)
    except OSError as exc:
        raise DemoError(f"the web server could not listen on port {port}: {exc}") from None
    # Without signal handlers of its own: on Ctrl-C it would stop the web server at once, before the producer
    # that still talks to it. Its access lines are left out: the simulated clusters' requests would drown the rest.
    server = node_server(app, settings, signals=False, graceful_shutdown=GRACEFUL_SHUTDOWN)
    logging.getLogger("gateway.access").setLevel(logging.WARNING)
    relay = Relay.from_settings(settings)
    also_export(
        app, RelayCollector(relay.figures, relay.joint)
    )  # the relay runs in this process: its figures on the node's /metrics
    web = asyncio.create_task(_web(server, sockets), name="web server")
    relaying = asyncio.create_task(relay.run(), name="relay")
    producing: asyncio.Task[None] | None = None
    try:
        while not server.started and not web.done():
            await asyncio.sleep(0.05)
        if web.done():
            raise DemoError(_ended(web))
        port = listening_port(sockets, port)  # --port 0: the one the system chose, for the clusters and the banner
        # The team's clusters at work, talking to the gateway as real clusters do (gpu-2 never confirms).
        simulation = Simulation(
            f"http://{host}:{port}",
            [seeded.cluster_keys[c] for c in seeded.cluster_ids if c in seeded.cluster_keys],
            silent={seeded.cluster_ids[1]},
            trajectories=seeded.trajectory_ids,
            speed=speed,
            seed=seed,
            staging=seeded.staging,
            users=seeded.user_ids,  # its members submit the uploads and pipeline runs
        )
        take_up(simulation, seeded)
        parts = [web, relaying]
        if simulation.clusters:  # none when every cluster was re-keyed by a person: the demo serves, nothing works
            producing = asyncio.create_task(simulation.run(), name="simulator")
            parts.append(producing)
        print(_banner(settings, host, port, seeded), flush=True)
        done, _ = await asyncio.wait(parts, return_when=asyncio.FIRST_COMPLETED)
        raise DemoError("; ".join(_ended(task) for task in done))  # a part that stops ends the demo
    finally:
        if producing is not None and not producing.done():  # first the producer, while the web server answers it
            producing.cancel()
            await _settle(STOP_PRODUCER_WITHIN, producing)
        server.stop()
        relaying.cancel()
        await _settle(STOP_SERVERS_WITHIN, *(task for task in (web, relaying) if not task.done()))


def listening_port(sockets: list[socket.socket], asked: int) -> int:
    """The port the server listens on: `asked`, or the free one the system gave for 0."""
    for sock in sockets:
        return int(sock.getsockname()[1])
    return asked


def take_up(simulation: Simulation, seeded: Seeded) -> None:
    """What a previous run left queued or running goes on; what it finished is kept as each cluster keeps the jobs
    it finished, so a retry of a failure from before the restart runs it again (never "Queued 0 of 4")."""
    for cluster in simulation.clusters:
        for job in seeded.unfinished:
            if job.cluster_id == cluster.cluster_id:
                cluster.adopt(job.id, job.kind, job.attempts, job.status, job.priority)
        for job in seeded.finished:
            if job.cluster_id == cluster.cluster_id:
                cluster.remember(job.id, job.kind, job.attempts, job.status)


async def _web(server: Server, sockets: list[socket.socket]) -> None:
    await server.serve(sockets)
    if not server.started:  # it logged why: the app's startup failed
        raise DemoError("the web server did not start")


def _ended(task: asyncio.Task[None]) -> str:
    """How a part ended by itself, in one line; the traceback too when it is a bug's."""
    error = None if task.cancelled() else task.exception()
    if error is None:
        return f"the {task.get_name()} stopped"
    if not isinstance(error, DemoError):
        log.error("the %s failed", task.get_name(), exc_info=error)
    return str(error) if isinstance(error, DemoError) else f"the {task.get_name()} failed: {error!r}"


async def _settle(within: float, *tasks: asyncio.Task[None]) -> None:
    """Wait for stopping tasks; one still running after `within` seconds is cancelled (again). Their errors are
    reported as one line each, since the demo is ending anyway."""
    if not tasks:
        return
    _, late = await asyncio.wait(tasks, timeout=within)
    for task in late:
        log.warning("the %s did not stop within %.0f s; cancelling it", task.get_name(), within)
        task.cancel()
    if late:
        await asyncio.wait(late, timeout=within)
    for task in tasks:
        if task.done() and not task.cancelled() and (error := task.exception()) is not None:
            log.warning("the %s stopped with %s: %s", task.get_name(), type(error).__name__, error)


def _banner(settings: Settings, host: str, port: int, seeded: Seeded) -> str:
    token = issue_token(settings.secret, seeded.user_ids[0], settings.token_ttl)
    return (
        "\n  Jobs gateway demo is running\n"
        f"  open        http://{host}:{port}/?token={token}\n"
        f"  DATABASE_URL={settings.database_url}\n"
        f"  REDIS_URL={settings.redis_url}\n"
        f"  GATEWAY_SECRET={settings.secret}\n"
        + "".join(f"  cluster key ({c}): {key}\n" for c, key in list(seeded.cluster_keys.items())[:1])
        + "".join(
            f"  cluster {c} keeps the key it was given since: the demo does not act as it\n" for c in seeded.kept_keys
        )
        + "  Ctrl-C stops everything it started.\n"
    )
