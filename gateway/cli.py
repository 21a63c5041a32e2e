"""`gateway demo | serve | relay | migrate | token | revoke | cluster-key`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import uvicorn

from .config import Settings

log = logging.getLogger("gateway")


def uvicorn_config(app: object, settings: Settings, host: str, port: int, **extra: object) -> uvicorn.Config:
    from .web.http import HttpLimits, bounded_protocol

    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        loop="uvloop",
        http=bounded_protocol(HttpLimits.from_settings(settings)),  # httptools, with bounds before the app sees a request
        ws="gateway.web.direct:DirectProtocol",  # uvicorn's sans-I/O protocol, plus the hand-over to the hub
        ws_max_size=settings.max_message_bytes,
        ws_per_message_deflate=False,  # it would defeat frames shared by every subscriber
        lifespan="on",
        log_config=None,  # uvicorn's loggers go through ours: one format, secrets redacted
        **extra,  # type: ignore[arg-type]
    )


def _require(settings: Settings, *names: str) -> None:
    missing = [n for n in names if not getattr(settings, n)]
    if missing:
        env = {"database_url": "DATABASE_URL", "redis_url": "REDIS_URL", "secret": "GATEWAY_SECRET"}
        sys.exit(f"gateway: set {', '.join(env[m] for m in missing)} (or use `gateway demo`)")


def cmd_serve(args: argparse.Namespace, settings: Settings) -> None:
    from .web.app import create_app

    _require(settings, "database_url", "redis_url", "secret")
    uvicorn.Server(uvicorn_config(create_app(settings), settings, args.host, args.port)).run()


def cmd_relay(args: argparse.Namespace, settings: Settings) -> None:
    from .relay.runner import Relay

    _require(settings, "database_url", "redis_url")
    relay = Relay(
        settings.database_url,
        settings.redis_url,
        history_length=settings.history_length,
        retention=settings.outbox_retention,
        job_retention=settings.job_retention,
        presence=not settings.single_user,
        metrics=not settings.local,
        cluster=settings.redis_cluster,
        partitions=settings.partitions,
        finish_settle=settings.finish_settle,
    )
    _run(relay.run())


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> None:
    from .store.migrate import migrate

    _require(settings, "database_url")
    applied = asyncio.run(migrate(settings.database_url))
    print(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else ""))


def cmd_token(args: argparse.Namespace, settings: Settings) -> None:
    from .web.auth import issue_token, read_token

    _require(settings, "secret")
    ttl = args.ttl or settings.token_ttl
    if ttl > settings.session_max_age:  # it would stop working then anyway
        sys.exit(f"gateway: --ttl is at most GATEWAY_SESSION_MAX_AGE ({settings.session_max_age} s)")
    token = issue_token(settings.secret, args.user, ttl)
    print(token)
    # Beside the token, not in stdout: `$(gateway token ...)` stays the token alone.
    print(f"token id {read_token(settings.secret, token).token_id}: `gateway revoke --token-id` ends it", file=sys.stderr)


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> None:
    """End sessions on every node: all of a user's so far, or the one a token id names."""
    import asyncpg

    from .bus.connection import Bus
    from .hub.revocations import RELOAD_EVERY, revoke

    _require(settings, "database_url")

    async def run() -> None:
        conn = await asyncpg.connect(settings.database_url)
        bus = Bus(settings.redis_url, settings.redis_cluster, settings.partitions) if settings.redis_url else None
        try:
            if args.user is not None and not await conn.fetchval("select 1 from users where id = $1", args.user):
                sys.exit(f"gateway: no user {args.user}")
            redis = bus.redis if bus is not None else None
            await revoke(conn, redis, settings.session_max_age, user_id=args.user, token_id=args.token_id)
        finally:
            await conn.close()
            if bus is not None:
                await bus.aclose()

    asyncio.run(run())
    what = f"every session of user {args.user} so far" if args.user is not None else f"the session of token id {args.token_id}"
    print(f"revoked {what}" + ("" if settings.redis_url else f" (no REDIS_URL: nodes find it within {RELOAD_EVERY:.0f} s)"))


def cmd_cluster_key(args: argparse.Namespace, settings: Settings) -> None:
    import asyncpg

    from .web.auth import new_cluster_key

    _require(settings, "database_url")

    async def rotate() -> str:
        conn = await asyncpg.connect(settings.database_url)
        try:
            key, key_hash = new_cluster_key(args.cluster)
            if await conn.execute("update clusters set key_hash = $2 where id = $1", args.cluster, key_hash) == "UPDATE 0":
                sys.exit(f"gateway: no cluster {args.cluster}")
            return key
        finally:
            await conn.close()

    print(asyncio.run(rotate()))


def cmd_simulate(args: argparse.Namespace, settings: Settings) -> None:
    from .sim.run import Simulation

    keys = args.cluster_key or [k for k in os.environ.get("GATEWAY_CLUSTER_KEYS", "").split(",") if k]
    if not keys or not settings.redis_url:
        sys.exit("gateway: simulate needs --cluster-key (or GATEWAY_CLUSTER_KEYS) and REDIS_URL")
    simulation = Simulation(
        args.url, settings.redis_url, keys, silent=set(args.silent_cluster), frames=(args.frames // 2, args.frames),
        speed=args.speed, redis_cluster=settings.redis_cluster,
    )
    _run(simulation.run())


def cmd_tail(args: argparse.Namespace, settings: Settings) -> None:
    """Print every message of the team's feed (or a trajectory's) as one JSON line, until interrupted;
    a failure is one line on stderr, with the exit status gateway/tail.py lists."""
    from .tail import Tail

    token = args.token or os.environ.get("GATEWAY_TOKEN", "")
    if not token and not args.token_command:
        sys.exit("gateway: tail needs --token, GATEWAY_TOKEN or --token-command")
    if args.trajectory is None and args.team is None:
        sys.exit("gateway: tail needs --team or --trajectory")
    if args.attempts is not None and args.attempts < 1:
        sys.exit("gateway: --attempts is at least 1")
    channel = f"trajectory:{args.trajectory}" if args.trajectory else f"team-jobs:{args.team}"
    tail = Tail(args.url, channel, token or None, args.token_command, args.format, args.attempts)
    _run(tail.run())
    sys.exit(tail.status)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> None:
    from .demo import DemoError, run_demo

    if args.speed <= 0:
        sys.exit("gateway: --speed must be above 0")
    try:
        _run(run_demo(settings, args.host, args.port, Path(args.data), speed=args.speed))
    except DemoError as exc:  # everything it started is stopped by now
        sys.exit(f"gateway: {exc}")


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run until done or interrupted; Ctrl-C, SIGTERM and SIGHUP (its terminal closed) cancel the main task so
    cleanups run. The second signal does not: it would cut them short (the demo's embedded servers would outlive
    it). A third one does, for a cleanup that hangs."""

    async def runner() -> None:
        task = asyncio.ensure_future(main)
        loop = asyncio.get_running_loop()
        signals = 0

        def stop() -> None:
            nonlocal signals
            signals += 1
            if signals == 2:
                log.warning("still stopping; signal once more to stop without waiting")
            else:
                task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        import uvloop

        uvloop.run(runner())
    except ImportError:  # pragma: no cover
        asyncio.run(runner())


def main(argv: list[str] | None = None) -> None:
    from .web.logs import configure

    configure(os.environ.get("GATEWAY_LOG_LEVEL", "INFO"), os.environ.get("GATEWAY_LOG_FORMAT", "text"))
    parser = argparse.ArgumentParser(prog="gateway", description="Real-time jobs gateway")
    parser.add_argument("--database-url", help="PostgreSQL URL (env DATABASE_URL)")
    parser.add_argument("--redis-url", help="Redis URL (env REDIS_URL)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="run everything: embedded PostgreSQL/Valkey when no URLs, relay, web, producer")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--data", default=os.environ.get("GATEWAY_DATA", ".gateway-data"), help="folder for embedded servers")
    p.add_argument("--speed", type=float, default=1.0, help="how much faster than real the simulated clusters work")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("serve", help="run a gateway node (web and websockets)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(func=cmd_serve)

    sub.add_parser("relay", help="run the relay (one active, others stand by)").set_defaults(func=cmd_relay)

    p = sub.add_parser("tail", help="print a team's (or a trajectory's) messages as JSON lines, resuming across reconnects")
    p.add_argument("--url", default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"), help="the gateway (env GATEWAY_URL)")
    p.add_argument("--token", help="a user token (env GATEWAY_TOKEN)")
    p.add_argument("--team", type=int, help="follow the team's full job feed (team-jobs:<id>)")
    p.add_argument("--trajectory", type=int, help="follow one trajectory instead")
    p.add_argument("--format", choices=["json", "msgpack"], default="json", help="the wire format (output is JSON lines)")
    p.add_argument(
        "--token-command", default=os.environ.get("GATEWAY_TOKEN_COMMAND"),
        help="a shell command that prints a fresh token, run whenever one is needed, e.g. 'gateway token --user 1'"
        " (env GATEWAY_TOKEN_COMMAND)",
    )  # fmt: skip
    p.add_argument("--attempts", type=int, help="connection attempts in a row before giving up (default: forever)")
    p.set_defaults(func=cmd_tail)

    p = sub.add_parser("simulate", help="run simulated clusters against a gateway (ingest API and Redis commands)")
    p.add_argument("--url", default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"), help="the gateway (env GATEWAY_URL)")
    p.add_argument("--cluster-key", action="append", help="a cluster's ingest key; repeat for several")
    p.add_argument("--silent-cluster", type=int, action="append", default=[], help="a cluster id that never confirms")
    p.add_argument("--frames", type=int, default=60, help="the most frames per uploaded trajectory (up to 10000)")
    p.add_argument("--speed", type=float, default=1.0, help="how much faster than real jobs run")
    p.set_defaults(func=cmd_simulate)
    sub.add_parser("migrate", help="apply the SQL migrations").set_defaults(func=cmd_migrate)

    p = sub.add_parser("token", help="print a signed token for a user")
    p.add_argument("--user", type=int, required=True)
    p.add_argument("--ttl", type=int, default=0, help="seconds (default GATEWAY_TOKEN_TTL)")
    p.set_defaults(func=cmd_token)

    p = sub.add_parser("revoke", help="end sessions on every node: all of a user's so far, or one token id's")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", type=int, help="every session of this user started before now")
    who.add_argument("--token-id", help="the session of this token id (its `jti` claim; renewals keep it)")
    p.set_defaults(func=cmd_revoke)

    p = sub.add_parser("cluster-key", help="issue a new ingest key for a cluster (the old one stops working)")
    p.add_argument("--cluster", type=int, required=True)
    p.set_defaults(func=cmd_cluster_key)

    args = parser.parse_args(argv)
    settings = Settings()
    if args.database_url:
        settings.database_url = args.database_url
    if args.redis_url:
        settings.redis_url = args.redis_url
    args.func(args, settings)


if __name__ == "__main__":
    main()
