"""What a trusted proxy says about a request: the client's scheme (X-Forwarded-Proto) and address
(X-Forwarded-For), believed only from the addresses in FORWARDED_ALLOW_IPS (by default the loopback, as
uvicorn had it); every other client's headers are ignored."""

from __future__ import annotations

import ipaddress
import os
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
DECIDED = 4096  # addresses whose trust is remembered


class Proxies:
    def __init__(self, trusted: str | None = None) -> None:
        spec = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1") if trusted is None else trusted
        names = [part.strip() for part in spec.split(",") if part.strip()]
        self.everyone = "*" in names
        self.networks: list[Network] = []
        self.hosts: set[str] = set()
        for name in names:
            try:
                self.networks.append(ipaddress.ip_network(name, strict=False))
            except ValueError:
                self.hosts.add(name)  # a unix socket path or a name: matched as written
        # Each address's answer, decided once: every request asked, parsing the address each time (a balancer's
        # few addresses, or the clients' and what X-Forwarded-For names, up to DECIDED of them).
        self._decided: dict[str, bool] = {}

    def trusts(self, host: str) -> bool:
        found = self._decided.get(host)
        if found is None:
            found = self._trusts(host)
            if len(host) > 64:  # no address is this long: not kept
                return found
            if len(self._decided) >= DECIDED:  # a bound, not an order: the peers seen again are decided again
                self._decided.clear()
            self._decided[host] = found
        return found

    def _trusts(self, host: str) -> bool:
        if self.everyone or host in self.hosts:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def apply(self, scope: dict[str, Any]) -> None:
        """Rewrite `scope`'s scheme and client from a trusted proxy's headers (a websocket's scheme ws/wss)."""
        client = scope.get("client")
        if client is None or not self.trusts(client[0]):
            return
        proto = forwarded_for = None
        for name, value in scope["headers"]:
            if name == b"x-forwarded-proto":
                proto = value.decode("latin-1").split(",")[-1].strip().lower()
            elif name == b"x-forwarded-for":
                forwarded_for = value.decode("latin-1")
        if proto in ("http", "https", "ws", "wss"):
            if scope["type"] == "websocket":
                proto = {"http": "ws", "https": "wss"}.get(proto, proto)
            else:
                proto = {"ws": "http", "wss": "https"}.get(proto, proto)
            scope["scheme"] = proto
        if forwarded_for:
            hosts = [host.strip() for host in forwarded_for.split(",") if host.strip()]
            for host in reversed(hosts):  # the first from the right that no trusted proxy added
                if not self.trusts(host):
                    scope["client"] = (host, 0)
                    break
            else:
                if hosts:
                    scope["client"] = (hosts[0], 0)
