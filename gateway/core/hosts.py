"""Host names and origins as a request states them: parsing a Host header, whether it is allowed, loopback, or the
same origin as a browser's Origin. Pure: the node's checks (gateway.web.http.hosts) and the metrics' scraper rule
(gateway.exposition) read them."""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
DEFAULT_PORTS = {"http": 80, "https": 443}
_HTTP_SCHEME = {"http": "http", "ws": "http", "https": "https", "wss": "https"}


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header's (or a netloc's) name, lowercased, and its port; None when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):  # an IPv6 literal keeps its brackets: "[::1]:8765"
        name, bracket, rest = value.partition("]")
        if not bracket:
            return None
        name, port_text = name + "]", rest[1:] if rest.startswith(":") else None
        if rest and port_text is None:
            return None
    else:
        name, colon, port_text = value.partition(":")
        if not colon:
            port_text = None
    if not name or any(c in name for c in "/@ \\"):
        return None
    if port_text is None:
        return name, None
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


def host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether a request naming `host` is for this node: its name is one of `allowed` ("*": any)."""
    if "*" in allowed:
        return True
    parsed = split_host(host)
    return parsed is not None and parsed[0] in allowed


def loopback_host(host: str) -> bool:
    """Whether the Host header names this machine's loopback (what a scraper on the node's host sends)."""
    parsed = split_host(host)
    return parsed is not None and parsed[0] in LOOPBACK_NAMES


def same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether a browser's Origin is the request's own origin: scheme, host and port (ports by default too).
    `scheme` is the request's (ws and wss are http and https here)."""
    parts = urlsplit(origin)
    origin_scheme = parts.scheme.lower()
    if origin_scheme not in DEFAULT_PORTS or origin_scheme != _HTTP_SCHEME.get(scheme):
        return False
    theirs, ours = split_host(parts.netloc), split_host(host)
    if theirs is None or ours is None:
        return False
    default = DEFAULT_PORTS[origin_scheme]
    return theirs[0] == ours[0] and (theirs[1] or default) == (ours[1] or default)
