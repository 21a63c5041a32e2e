"""Settings from the environment; command-line flags override them.

A value that does not parse raises ConfigError naming the variable (`gateway` prints it as one line)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

MIN_SECRET_LENGTH = 32
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
WORKER_ENV = "GATEWAY_WORKER"  # a `serve --workers` worker's index, which /healthz reports
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "[::1]")  # the names a node on this machine is reached by


class ConfigError(ValueError):
    """A setting is missing or has a value the gateway cannot use; the message names the variable."""


def _int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r}: expected an integer >= {minimum}")
    return value


def _port(name: str) -> int:
    """A TCP port, or 0 for none."""
    value = _int(name, 0)
    if value > 65535:
        raise ConfigError(f"{name}={value}: expected a port, 1 to 65535 (0: none)")
    return value


def _float(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a number") from None
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"{name}={raw!r}: expected a number >= {minimum:g}")
    return value


def _fraction(name: str, default: float) -> float:
    """A number above 0 and at most 1."""
    value = _float(name, default)
    if not 0 < value <= 1:
        raise ConfigError(f"{name}={os.environ[name]!r}: expected a number above 0 and at most 1")
    return value


def _choice(name: str, default: str, choices: tuple[str, ...], upper: bool = False) -> str:
    raw = os.environ.get(name, "")
    value = (raw.upper() if upper else raw) or default
    if value not in choices:
        raise ConfigError(f"{name}={raw!r}: expected one of {', '.join(choices)}")
    return value


def _flag(name: str) -> bool:
    raw = os.environ.get(name, "")
    if raw not in ("", "0", "1"):
        raise ConfigError(f"{name}={raw!r}: expected 1 or 0")
    return raw == "1"


def check_secret(secret: str) -> None:
    """What every command that signs tokens asks of GATEWAY_SECRET (the value itself is never shown)."""
    if not secret:
        raise ConfigError("set GATEWAY_SECRET: it signs every user token")
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(
            f"GATEWAY_SECRET has {len(secret)} characters: expected at least {MIN_SECRET_LENGTH} (it signs every user token)"
        )


def _hosts() -> tuple[str, ...]:
    raw = os.environ.get("GATEWAY_HOSTS", "")
    names = tuple(h.strip().lower() for h in raw.split(",") if h.strip())
    for name in names:
        if name != "*" and (name.startswith("http") and "://" in name or "/" in name):
            raise ConfigError(f"GATEWAY_HOSTS: {name!r} is not a host name (give names like jobs.example.org)")
    # A name given with a port answers for that name on any port: the port is the listener's business.
    return tuple(n if n.startswith("[") or n == "*" else n.partition(":")[0] for n in names) or DEFAULT_HOSTS


def _origins() -> tuple[str, ...]:
    raw = os.environ.get("GATEWAY_ORIGINS", "")
    return tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())


@dataclass
class Settings:
    database_url: str = field(default_factory=lambda: os.environ.get("DATABASE_URL", ""))
    redis_url: str = field(default_factory=lambda: os.environ.get("REDIS_URL", ""))
    # REDIS_URL names one node of a Redis Cluster (7+ or Valkey): sharded pub/sub, a connection per shard.
    redis_cluster: bool = field(default_factory=lambda: _flag("GATEWAY_REDIS_CLUSTER"))
    # Teams are split over this many partitions, each published by one active relay (any number of relay
    # processes share them out). Every relay and node must agree on it: change it only with all stopped.
    partitions: int = field(default_factory=lambda: _int("GATEWAY_PARTITIONS", 1, minimum=1))
    # Signs user tokens. Without one, `serve` refuses to start (the demo makes one up).
    secret: str = field(default_factory=lambda: os.environ.get("GATEWAY_SECRET", ""))
    # The host names the node answers for (the Host header, port aside); any other gets 421. "*": any.
    hosts: tuple[str, ...] = field(default_factory=_hosts)
    # Allowed browser origins for the websocket; empty means same origin only.
    origins: tuple[str, ...] = field(default_factory=_origins)
    log_level: str = field(default_factory=lambda: _choice("GATEWAY_LOG_LEVEL", "INFO", LOG_LEVELS, upper=True))
    log_format: str = field(default_factory=lambda: _choice("GATEWAY_LOG_FORMAT", "text", ("text", "json")))
    token_ttl: int = field(default_factory=lambda: _int("GATEWAY_TOKEN_TTL", 12 * 3600, minimum=1))
    # No session lasts longer than this from its sign-in, renewed or not (seconds); then the user signs in again.
    session_max_age: int = field(default_factory=lambda: _int("GATEWAY_SESSION_MAX_AGE", 7 * 24 * 3600, minimum=1))
    # HTTP API requests per second per user (token) and per cluster (key), in bursts up to `http_burst`; 0: no limit.
    http_rate: float = field(default_factory=lambda: _float("GATEWAY_HTTP_RATE", 50))
    http_burst: float = field(default_factory=lambda: _float("GATEWAY_HTTP_BURST", 250))
    # Scrapers of /metrics send it as a bearer token; unset, only loopback clients (not through a proxy) may scrape.
    metrics_token: str = field(default_factory=lambda: os.environ.get("GATEWAY_METRICS_TOKEN", ""))
    # The relay's own /metrics (same token rule); 0: none. Bind another host than loopback only with a token.
    relay_metrics_port: int = field(default_factory=lambda: _int("GATEWAY_RELAY_METRICS_PORT", 0))
    relay_metrics_host: str = field(default_factory=lambda: os.environ.get("GATEWAY_RELAY_METRICS_HOST", "127.0.0.1"))
    # A second port `gateway serve` listens on, serving the same node, for the load balancer's health checks and
    # Prometheus: its own accept queue, which a reconnect storm's connections cannot fill; 0: none.
    health_port: int = field(default_factory=lambda: _port("GATEWAY_HEALTH_PORT"))
    # The address the health port binds; empty: the one `serve --host` names. It answers /healthz, /readyz and
    # /metrics only (404 for the rest), so bind it where only the load balancer and Prometheus reach.
    health_host: str = field(default_factory=lambda: os.environ.get("GATEWAY_HEALTH_HOST", "").strip())
    # Connections the health port holds open at once (idle ones included); past it a new one gets 503 and is
    # closed. Nothing on the health port counts against the main port's bounds.
    health_max_connections: int = field(default_factory=lambda: _int("GATEWAY_HEALTH_MAX_CONNECTIONS", 32, minimum=1))
    # Per-connection pending output before a resync, in bytes.
    max_pending_bytes: int = field(default_factory=lambda: _int("GATEWAY_MAX_PENDING_BYTES", 4 << 20))
    # Seconds between keepalive pings; a connection that has not answered one by the next, and read nothing
    # meanwhile, is closed (1011). A slow reader must read about its receive buffer's worth in each interval.
    keepalive: float = field(default_factory=lambda: _float("GATEWAY_KEEPALIVE", 25))
    max_subscriptions: int = field(default_factory=lambda: _int("GATEWAY_MAX_SUBSCRIPTIONS", 100))
    max_message_bytes: int = field(default_factory=lambda: _int("GATEWAY_MAX_MESSAGE_BYTES", 64 << 10))
    # permessage-deflate for clients that offer it (each shared frame deflated once for all of them); 0: never.
    compression: bool = field(
        default_factory=lambda: not os.environ.get("GATEWAY_COMPRESSION") or _flag("GATEWAY_COMPRESSION")
    )
    max_connections_per_user: int = field(default_factory=lambda: _int("GATEWAY_MAX_CONNECTIONS_PER_USER", 20))
    # Client messages per second per connection (bursts up to four times as many).
    max_messages_per_second: float = field(default_factory=lambda: _float("GATEWAY_MAX_MESSAGES_PER_SECOND", 50))
    # Every frame a websocket client sends (pings, pongs, continuations, messages) and every byte, per second per
    # connection, in bursts of four seconds' worth; past either the connection is closed with 4029.
    max_frames_per_second: float = field(default_factory=lambda: _float("GATEWAY_MAX_FRAMES_PER_SECOND", 200, 1.0))
    max_bytes_per_second: float = field(default_factory=lambda: _float("GATEWAY_MAX_BYTES_PER_SECOND", 256 << 10, 1.0))
    # Seconds a client's frame or fragmented message may stay unfinished before the connection is closed (1008).
    message_timeout: float = field(default_factory=lambda: _float("GATEWAY_MESSAGE_TIMEOUT", 10, 0.1))
    # New websockets admitted per second per node (bursts as large): a reconnect storm is let in at this
    # rate, the rest told to retry after a jittered delay.
    admission_rate: float = field(default_factory=lambda: _float("GATEWAY_ADMISSION_RATE", 2000))
    # The most of that rate one user may take (a fraction, 0 to 1, at least one a second): past it their new
    # websockets get 503 on their own, and neither spend the node's rate nor lengthen others' retry hints.
    admission_share: float = field(default_factory=lambda: _fraction("GATEWAY_ADMISSION_SHARE", 0.05))
    # Seconds between SIGTERM and closing the websockets, while /readyz answers 503: long enough for the load
    # balancer to take the node out (HAProxy's defaults: a check every 2 s, down after 3 failed, so 6 s).
    drain_seconds: float = field(default_factory=lambda: _float("GATEWAY_DRAIN_SECONDS", 6))
    # The longest window the websockets' retry hints spread over when the node stops (docs/protocol.md, 1012):
    # the hints come back at a quarter of GATEWAY_ADMISSION_RATE a second, but never spread past this.
    restart_spread: float = field(default_factory=lambda: _float("GATEWAY_RESTART_SPREAD_SECONDS", 30))
    max_body_bytes: int = field(default_factory=lambda: _int("GATEWAY_MAX_BODY_BYTES", 8 << 20))
    # What a request (or a websocket's upgrade request) may cost before the app sees it (gateway.web.server.limits):
    # a longer URL gets 414, more or larger header lines 431, headers or a body not complete in time 408.
    max_request_line_bytes: int = field(default_factory=lambda: _int("GATEWAY_MAX_REQUEST_LINE_BYTES", 8 << 10))
    max_header_bytes: int = field(default_factory=lambda: _int("GATEWAY_MAX_HEADER_BYTES", 64 << 10))
    max_headers: int = field(default_factory=lambda: _int("GATEWAY_MAX_HEADERS", 100))
    # Seconds from the connection (or a kept-alive request's first byte) to the end of the headers, and from
    # there to the end of the body (an 8 MiB body then needs some 280 KB/s).
    header_timeout: float = field(default_factory=lambda: _float("GATEWAY_HEADER_TIMEOUT", 10))
    body_timeout: float = field(default_factory=lambda: _float("GATEWAY_BODY_TIMEOUT", 30))
    # Connections still waiting for their headers; past this a new connection gets 503 and is closed at once.
    max_pending_handshakes: int = field(default_factory=lambda: _int("GATEWAY_MAX_PENDING_HANDSHAKES", 1000))
    # Messages kept per channel for clients that resume from a cursor (>= 10 minutes at 20 a second).
    history_length: int = field(default_factory=lambda: _int("GATEWAY_HISTORY_LENGTH", 12000))
    # ... and at most this many bytes of messages per channel, the oldest trimmed first (the newest always
    # kept): a resume that reaches back past them gets a snapshot (docs/operations.md, "The history's memory").
    history_bytes: int = field(default_factory=lambda: _int("GATEWAY_HISTORY_BYTES", 8 << 20, minimum=1))
    # Outbox rows are deleted this long after the relay published them (takeovers replay from the outbox).
    outbox_retention: float = field(default_factory=lambda: _float("GATEWAY_OUTBOX_RETENTION", 900))
    # A job stays listed this long after its last change (database clock), then drops out.
    job_retention: float = field(default_factory=lambda: _float("GATEWAY_RETENTION", 24 * 3600))
    # Who did what (actions, membership changes, key rotations) is kept this many days, then pruned by the relay.
    activity_days: float = field(default_factory=lambda: _float("GATEWAY_ACTIVITY_DAYS", 90))
    # Seconds a trajectory must stay with no active job before its work counts as finished (toast and glow): an
    # upload that arrives in chunks closer together than this finishes once.
    finish_settle: float = field(default_factory=lambda: _float("GATEWAY_FINISH_SETTLE", 0.5))
    # Submissions a relay keeps in memory besides those in use (tasks waiting or running, a change not yet out):
    # the least recently changed past it are set aside and read back from their saved rows when they change.
    relay_submissions_cached: int = field(
        default_factory=lambda: _int("GATEWAY_RELAY_SUBMISSIONS_CACHED", 100_000, minimum=1)
    )
    # Seconds a cluster may send nothing (no job report, no metrics) before its unfinished jobs are listed as
    # "cluster silent since ..." (they come back to their statuses when it reports again).
    cluster_silent_after: float = field(default_factory=lambda: _float("GATEWAY_CLUSTER_SILENT_AFTER", 120, 1.0))
    # Seconds the active relay keeps trying a Redis that does not answer before it steps down, so that a relay
    # that can reach Redis takes its partition over (gateway.relay.retry); 0: never.
    relay_step_down_after: float = field(default_factory=lambda: _float("GATEWAY_RELAY_STEP_DOWN_AFTER", 10))
    # How long an action waits for the clusters to confirm, in seconds.
    command_timeout: float = field(default_factory=lambda: _float("GATEWAY_COMMAND_TIMEOUT", 3))
    # How long a command is kept for a cluster whose feed is away, in seconds: its feed's snapshot lists every
    # command not yet confirmed and younger than this.
    command_expiry: float = field(default_factory=lambda: _float("GATEWAY_COMMAND_EXPIRY", 600, 1.0))
    # Actions in flight (waiting for their clusters) per user and per team, on one node; past them: 429.
    max_actions_per_user: int = field(default_factory=lambda: _int("GATEWAY_MAX_ACTIONS_PER_USER", 4))
    max_actions_per_team: int = field(default_factory=lambda: _int("GATEWAY_MAX_ACTIONS_PER_TEAM", 16))
    # Seconds each statement of a person's read (a window, a search, a page of an export) may run before
    # PostgreSQL cancels it; a search cut so answers 422. 0: no bound. The relay, ingest and migrations have none.
    statement_timeout: float = field(default_factory=lambda: _float("GATEWAY_STATEMENT_TIMEOUT", 5))
    # Heavy reads (searches, pages past the 10,000th row, exports) one user may have running at once, per node;
    # past it 429.
    max_heavy_reads_per_user: int = field(default_factory=lambda: _int("GATEWAY_MAX_HEAVY_READS_PER_USER", 4, 1))
    # Searches and deep pages running at once per node, whoever asks: each holds one of the pool's 10 connections
    # while it runs, and the rest of the node's calls need the others. Past it 429.
    max_heavy_reads: int = field(default_factory=lambda: _int("GATEWAY_MAX_HEAVY_READS", 5, 1))
    # CSV exports streaming at once, per user and per node (each worker of `serve --workers`); past them 429.
    max_exports_per_user: int = field(default_factory=lambda: _int("GATEWAY_MAX_EXPORTS_PER_USER", 2, 1))
    max_exports: int = field(default_factory=lambda: _int("GATEWAY_MAX_EXPORTS", 8, 1))
    # Seconds an HTTP answer may wait for its reader to take more (the node's buffers for it full) before the
    # connection is cut: a CSV export whose reader reads nothing gives its slot and buffers back.
    send_stall: float = field(default_factory=lambda: _float("GATEWAY_SEND_STALL_SECONDS", 30, 0.1))
    # Rows a team's clusters may create an hour through the ingest API, per node (in bursts of an hour's
    # worth): jobs, and trajectories, analyses and submissions together; past them 429. 0: no limit.
    max_new_jobs_per_hour: int = field(default_factory=lambda: _int("GATEWAY_MAX_NEW_JOBS_PER_HOUR", 500_000))
    max_new_trajectories_per_hour: int = field(
        default_factory=lambda: _int("GATEWAY_MAX_NEW_TRAJECTORIES_PER_HOUR", 10_000)
    )
    # A single-user deployment shows no online count; local mode (the app in a browser tab or the desktop
    # app) shows no cluster metrics.
    single_user: bool = field(default_factory=lambda: _flag("GATEWAY_SINGLE_USER"))
    local: bool = field(default_factory=lambda: _flag("GATEWAY_LOCAL"))
    demo: bool = field(default_factory=lambda: _flag("GATEWAY_DEMO"))
