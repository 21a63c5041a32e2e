"""What REDIS_URL may say: one server (redis://, rediss://, unix://, as redis-py reads them; with
GATEWAY_REDIS_CLUSTER=1, any node of a Redis Cluster), or the primary a set of Redis Sentinels names:

    redis+sentinel://[[username]:password@]host[:port][,host[:port]...]/service[?option=value&...]

Each host is a sentinel (port 26379 when left out; IPv6 in brackets); `service` is the name the sentinels monitor
(`sentinel monitor <service> ...`). The credentials before the `@` are the primary's. Options: `db` (the
database number, 0 by default), `sentinel_username` and `sentinel_password` (when the sentinels ask for their
own, `requirepass` in sentinel.conf). Anything else is refused, as is TLS (`rediss+sentinel://`).

Pure parsing (no redis import): `gateway` checks the setting before any command runs, and a URL that cannot work
is a ConfigError naming what is wrong, never echoing a password.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from ..config import ConfigError

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
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme in SERVER_SCHEMES and sep:
        _server(url)
        return None
    if scheme == "rediss+sentinel":
        raise _invalid("TLS to the sentinels (rediss+sentinel://) is not supported; use redis+sentinel://")
    if scheme != SENTINEL_SCHEME or not sep:
        raise _invalid(f"expected a URL starting redis://, rediss://, unix:// or {SENTINEL_SCHEME}://")
    if cluster:
        raise _invalid(
            f"a {SENTINEL_SCHEME}:// URL names one primary, not a Redis Cluster: unset GATEWAY_REDIS_CLUSTER"
            " (a cluster fails over by itself; give one of its nodes as redis://host:port)"
        )
    return _sentinels(rest)


def _server(url: str) -> int | None:
    """What redis-py would stumble on later, said now: a port that is not a number."""
    try:
        return urlsplit(url).port
    except ValueError:
        raise _invalid("the port is not a number from 0 to 65535") from None


def _sentinels(rest: str) -> Sentinels:
    netloc, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    userinfo, at, hostlist = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username, password = unquote(user) or None, (unquote(secret) if colon else None)
    hosts = tuple(_host(piece) for piece in hostlist.split(","))
    service = unquote(path)
    if not service:
        raise _invalid(f"name the monitored service after the sentinels: {SENTINEL_SCHEME}://host:26379/mymaster")
    if "/" in service:
        raise _invalid(f"one service name after the sentinels, not {service!r} (a database number goes in ?db=)")
    options = _options(query)
    return Sentinels(
        hosts,
        service,
        db=_db(options.get("db", "0")),
        username=username,
        password=password,
        sentinel_username=options.get("sentinel_username"),
        sentinel_password=options.get("sentinel_password"),
    )


def _host(piece: str) -> tuple[str, int]:
    if piece.startswith("["):  # [v6 address]:port
        host, bracket, port = piece[1:].partition("]")
        if not bracket or port and not port.startswith(":"):
            raise _invalid(f"sentinel {piece!r}: expected [address]:port")
        port = port[1:]
    else:
        host, _, port = piece.partition(":")
    if not host:
        raise _invalid("a sentinel's host is missing: list them as host:port,host:port")
    if not port:
        return host, SENTINEL_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise _invalid(f"sentinel {piece!r}: the port is not a number from 1 to 65535")
    return host, int(port)


def _options(query: str) -> dict[str, str]:
    try:
        pairs = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise _invalid("the options after ? are not name=value pairs joined by &") from None
    unknown = sorted(set(pairs) - set(SENTINEL_OPTIONS))
    if unknown:
        raise _invalid(f"unknown option {', '.join(unknown)} (known: {', '.join(SENTINEL_OPTIONS)})")
    return {name: values[-1] for name, values in pairs.items()}


def _db(value: str) -> int:
    if not value.isdigit():
        raise _invalid("db is not a database number")
    return int(value)


def _invalid(message: str) -> ConfigError:
    return ConfigError(f"REDIS_URL: {message}")
