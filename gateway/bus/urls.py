"""What REDIS_URL may say: one server (redis://, rediss://, unix://, as redis-py reads them; with
GATEWAY_REDIS_CLUSTER=1, any node of a Redis Cluster), or the primary a set of Redis Sentinels names:

    redis+sentinel://[[username]:password@]host[:port][,host[:port]...]/service[?option=value&...]

Each host is a sentinel (port 26379 when left out; IPv6 in brackets); `service` is the name the sentinels monitor
(`sentinel monitor <service> ...`). The credentials before the `@` are the primary's. Options: `db` (the
database number, 0 by default), `sentinel_username` and `sentinel_password` (when the sentinels ask for their
own, `requirepass` in sentinel.conf). Anything else is refused, as is TLS (`rediss+sentinel://`).

Pure parsing (no redis import): `gateway` checks the setting before any command runs, and a URL that cannot work
is a ConfigError naming what is wrong, quoting no part of the URL (gateway.core.urls: a password may be in it).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from ..config import ConfigError
from ..core.urls import BadUrl, Parts, host_port, split

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
SERVER_SCHEMES = ("redis", "rediss", "unix")
SENTINEL_OPTIONS = ("db", "sentinel_username", "sentinel_password")


@dataclass(frozen=True)
class Sentinels:
    """The sentinels to ask, the service they monitor, and how to log in to its primary and to them."""

    hosts: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None


def parse(url: str, cluster: bool = False) -> Sentinels | None:
    """The sentinels of a redis+sentinel:// URL; None for a URL of one server (or a cluster's node), which redis-py
    reads itself. A URL that neither can use raises ConfigError."""
    try:
        return _parse(url, cluster)
    except BadUrl as bad:
        raise ConfigError(f"REDIS_URL: {bad}") from None


def _parse(url: str, cluster: bool) -> Sentinels | None:
    scheme = url.partition("://")[0].lower()
    if scheme == "rediss+sentinel":
        raise BadUrl("TLS to the sentinels (rediss+sentinel://) is not supported; use redis+sentinel://")
    if scheme not in (*SERVER_SCHEMES, SENTINEL_SCHEME) or "://" not in url:
        raise BadUrl(f"expected a URL starting redis://, rediss://, unix:// or {SENTINEL_SCHEME}://")
    parts = split(url)
    if scheme in SERVER_SCHEMES:
        _server(url)
        return None
    if cluster:
        raise BadUrl(
            f"a {SENTINEL_SCHEME}:// URL names one primary, not a Redis Cluster: unset GATEWAY_REDIS_CLUSTER"
            " (a cluster fails over by itself; give one of its nodes as redis://host:port)"
        )
    return _sentinels(parts)


def _server(url: str) -> int | None:
    """What redis-py would stumble on later, said now: a port that is not a number."""
    try:
        return urlsplit(url).port
    except ValueError:
        raise BadUrl("the port is not a number from 0 to 65535") from None


def _sentinels(parts: Parts) -> Sentinels:
    username = password = None
    if parts.credentials is not None:
        user, colon, secret = parts.credentials.partition(":")
        username, password = unquote(user) or None, (unquote(secret) if colon else None)
    hosts = tuple(_sentinel(piece) for piece in parts.hosts.split(","))
    service = unquote(parts.path[1:])
    if not service:
        raise BadUrl(f"name the monitored service after the sentinels: {SENTINEL_SCHEME}://host:26379/mymaster")
    if "/" in service:
        raise BadUrl("one service name after the sentinels, with no '/' in it (a database number goes in ?db=)")
    options = _options(parts.query)
    return Sentinels(
        hosts,
        service,
        db=_db(options.get("db", "0")),
        username=username,
        password=password,
        sentinel_username=options.get("sentinel_username"),
        sentinel_password=options.get("sentinel_password"),
    )


def _sentinel(piece: str) -> tuple[str, int]:
    host, port = host_port(piece, SENTINEL_PORT)
    if not host:
        raise BadUrl("a sentinel's host is missing: list them as host:port,host:port")
    return host, port or SENTINEL_PORT


def _options(query: str) -> dict[str, str]:
    try:
        pairs = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise BadUrl("the options after ? are not name=value pairs joined by &") from None
    if set(pairs) - set(SENTINEL_OPTIONS):
        # Not named: an option's name may be a piece of a password that holds `&`.
        raise BadUrl(f"an unknown option after ? (known: {', '.join(SENTINEL_OPTIONS)}; write & in a password %26)")
    return {name: values[-1] for name, values in pairs.items()}


def _db(value: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 5):
        raise BadUrl("db is not a database number")
    return int(value)
