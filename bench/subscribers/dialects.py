"""A *dialect* is how a subscriber speaks to one system and what it keeps (per channel, job id -> (version,
status); for the gateway's ``team:N`` channels, the latest ``counts``): the `Dialect` protocol below. `await_state`:
the peers' dialects are live only once each channel's state, which the peers send at connect where the tap keeps it
(fanout, storm), has arrived.

A new dialect is a module of its own (``gateway_dialect``, ``plain``, ``socketio``) whose class has the protocol's
members, and one line in `DIALECTS`; tests/unit/test_bench_apart.py holds every registered one to the protocol."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .counters import Stats
from .gateway_dialect import GatewayDialect
from .plain import PlainDialect
from .socketio import SocketIODialect


@runtime_checkable
class Dialect(Protocol):
    """What a subscriber (subscriber.py) asks of its dialect, from connect to close, and what the fleet reads."""

    stats: Stats  # the worker's counters, shared by its subscribers
    notify: Callable[[], None]  # set by the subscriber: called when ready() may have changed

    @property
    def headers(self) -> list[str]:
        """Extra lines of the websocket handshake."""
        ...

    def target(self, path: str, query: str) -> tuple[str, str]:
        """The path and query to open, from those of the system's URL."""
        ...

    def opened(self, send: Callable[[bytes, bool], None]) -> None:
        """A connection is open; `send(data, binary)` writes one masked frame on it."""
        ...

    def message(self, opcode: int, payload: bytes | bytearray, now: float) -> None:
        """A frame arrived (`now`: the wall clock in ms, for latencies)."""
        ...

    def closed(self) -> None:
        """The connection is gone; what is kept stays for the next one."""
        ...

    def ready(self) -> bool:
        """Live: every channel's state has arrived on this connection."""
        ...

    def raw_states(self) -> dict[str, Any]:
        """{channel: packed jobs | counts}, as the worker compares them."""
        ...

    def states(self) -> dict[str, Any]:
        """{channel: {job_id: (version, status)}} ({status: count} for team channels)."""
        ...


@runtime_checkable
class Resuming(Dialect, Protocol):
    """A dialect whose subscriber resumes from cursors and can say what it holds (the gateway's): the faults and
    deploy scenarios ask where each stands and wait for the marks of a change."""

    def cursors(self) -> dict[str, str | None]: ...

    def shows(self, marks: Mapping[str, tuple[str, Any, int]]) -> bool: ...


# How to make each dialect: (channels, stats, await_state) -> Dialect. A new dialect: its module and a line here.
DIALECTS: dict[str, Callable[[Sequence[str], Stats, bool], Dialect]] = {
    "gateway": lambda channels, stats, await_state: GatewayDialect(channels, stats),
    "gateway-msgpack": lambda channels, stats, await_state: GatewayDialect(channels, stats, fmt="msgpack"),
    "plain": PlainDialect,
    "socketio": SocketIODialect,
}


def make_dialect(name: str, channels: Sequence[str], stats: Stats, await_state: bool = False) -> Dialect:
    make = DIALECTS.get(name)
    if make is None:
        raise ValueError(f"unknown dialect {name!r}: one of {', '.join(DIALECTS)}")
    return make(channels, stats, await_state)
