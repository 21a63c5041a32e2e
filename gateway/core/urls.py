"""The shape every server URL a setting holds must have (DATABASE_URL, REDIS_URL), without I/O.

A password may sit in such a URL, so a refusal says what is wrong and never quotes any part of it. The one
ambiguity that matters is where the credentials end: a password holding `@`, `/`, `?` or `#` as it is moves the
host (clients disagree on which `@` ends the credentials; asyncpg takes the first, redis-py the last) and then a
piece of the password reaches a resolver, an error message or a log. So the credentials end at the one `@` before
the host, and nothing after the host holds an `@` or a `#`.
"""

from __future__ import annotations

from dataclasses import dataclass

ENCODE = "percent-encode @ : / ? # in the user name and password (%40 %3A %2F %3F %23)"


class BadUrl(ValueError):
    """What is wrong with a URL, in words that quote no part of it."""


@dataclass(frozen=True)
class Parts:
    scheme: str  # in lower case
    credentials: str | None  # what comes before the `@`, None without one
    hosts: str  # host, host:port, [v6 address]:port, or several joined by commas
    path: str  # from the first `/` after the hosts, without the query
    query: str  # after the `?`


def split(url: str) -> Parts:
    """A URL `scheme://[credentials@]hosts[/path][?query]` in its parts; raises BadUrl where they are ambiguous."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        raise BadUrl("expected scheme://host...")
    if "#" in rest:
        raise BadUrl(f"it holds a '#': {ENCODE}")
    ends = [i for i in (rest.find("/"), rest.find("?")) if i >= 0]
    end = min(ends, default=len(rest))
    authority, tail = rest[:end], rest[end:]
    credentials, at, hosts = authority.rpartition("@")
    if "@" in credentials or "@" in tail:
        raise BadUrl(f"its credentials do not end at one '@' before the host: {ENCODE}")
    path, _, query = tail.partition("?")
    return Parts(scheme.lower(), credentials if at else None, hosts, path, query)


def host_port(piece: str, default_port: int | None) -> tuple[str, int | None]:
    """`host`, `host:port` or `[v6 address]:port`, the port 1 to 65535 in ASCII digits (`default_port` without
    one); raises BadUrl."""
    if piece.startswith("["):
        host, bracket, port = piece[1:].partition("]")
        if not bracket or port and not port.startswith(":"):
            raise BadUrl("an IPv6 host is written [address]:port")
        port = port[1:]
    else:
        host, _, port = piece.partition(":")
    if not port:
        return host, default_port
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
        raise BadUrl(f"a port is not a number from 1 to 65535 (if that is part of a password: {ENCODE})")
    return host, int(port)
