"""What DATABASE_URL may say, as asyncpg reads it:

    postgresql://[user[:password]@][host][:port][,host[:port]...][/database][?option=value&...]

(`postgres://` too). Pure checking (no asyncpg import): `gateway` checks the setting before any command runs, and
a URL asyncpg would misread or refuse is a ConfigError naming what is wrong, quoting no part of the URL
(gateway.core.urls: a password may be in it).
"""

from __future__ import annotations

from urllib.parse import parse_qs

from ..config import ConfigError
from ..core.urls import BadUrl, host_port, split

SCHEMES = ("postgresql", "postgres")
PORT = 5432
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")  # libpq's, as asyncpg reads them


def check(url: str) -> None:
    """Raise ConfigError when DATABASE_URL is no URL asyncpg reads as written."""
    try:
        _check(url)
    except BadUrl as bad:
        raise ConfigError(f"DATABASE_URL: {bad}") from None


def _check(url: str) -> None:
    if url.partition("://")[0].lower() not in SCHEMES or "://" not in url:
        raise BadUrl("expected a URL starting postgresql:// or postgres://")
    parts = split(url)
    if parts.hosts:  # none: asyncpg's defaults (PGHOST, the local socket)
        for piece in parts.hosts.split(","):
            host_port(piece, PORT)
    if parts.query:
        try:
            options = parse_qs(parts.query, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            raise BadUrl("the options after ? are not name=value pairs joined by &") from None
        for mode in options.get("sslmode", []):
            if mode not in SSL_MODES:  # asyncpg refuses the connection then: a setting, not an unreachable server
                raise BadUrl(f"sslmode is one of {', '.join(SSL_MODES)}")
