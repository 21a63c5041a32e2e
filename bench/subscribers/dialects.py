"""A *dialect* is how a subscriber speaks to one system and what it keeps (per channel, job id -> (version,
status); for the gateway's ``team:N`` channels, the latest ``counts``). Each has: target(path, query) -> (path,
query); headers (extra handshake lines); opened(send); message(opcode, payload, now_ms); closed(); ready();
raw_states() -> {channel: packed jobs | counts}. send(data: bytes, binary: bool) writes one masked frame;
notify() is called when ready() may have changed. `await_state`: the peers' dialects are live only once each
channel's state, which the peers send at connect where the tap keeps it (fanout, storm), has arrived."""

from __future__ import annotations

from collections.abc import Sequence

from .counters import Stats
from .gateway_dialect import GatewayDialect
from .plain import PlainDialect
from .socketio import SocketIODialect

Dialect = GatewayDialect | PlainDialect | SocketIODialect
DIALECTS = ("gateway", "gateway-msgpack", "plain", "socketio")


def make_dialect(name: str, channels: Sequence[str], stats: Stats, await_state: bool = False) -> Dialect:
    if name == "gateway":
        return GatewayDialect(channels, stats)
    if name == "gateway-msgpack":
        return GatewayDialect(channels, stats, fmt="msgpack")
    if name == "plain":
        return PlainDialect(channels, stats, await_state)
    if name == "socketio":
        return SocketIODialect(channels, stats, await_state)
    raise ValueError(f"unknown dialect {name!r}: one of {', '.join(DIALECTS)}")
