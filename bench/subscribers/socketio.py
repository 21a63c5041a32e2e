"""The benchmark's subscriber of the Socket.IO peers (Socket.IO 4 / Engine.IO 4, Node and python-socketio):
``/socket.io/?EIO=4&transport=websocket``; ``0{..}`` -> ``40``; ``40{..}`` -> ``42["join",ch]`` per channel;
``2`` -> ``3``; ``42["job", change-with-channel]`` (a job's whole state, as the plain peers' changes) and, in a
team room, ``42["counts", {"channel", "seq", "counts"}]`` after a transaction's changes. Live once the joins are
sent (the servers acknowledge nothing); with ``await_state``, once every channel's ``42["state", {"channel",
"changes", ...}]`` has arrived too (the channel's current state, sent to a socket as it joins; fanout and storm)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .counters import Stats
from .jobstate import unpack_jobs
from .plain import Change, PlainMessage, apply_changes, apply_counts, apply_state, noop, with_query

_json_encode = msgspec.json.encode


class _Counts(msgspec.Struct):
    channel: str
    counts: dict[str, int]
    seq: int = 0


_sio_event = msgspec.json.Decoder(tuple[str, msgspec.Raw]).decode
_sio_job = msgspec.json.Decoder(Change | list[Change]).decode
_sio_counts = msgspec.json.Decoder(_Counts).decode
_sio_state = msgspec.json.Decoder(PlainMessage).decode


class SocketIODialect:
    """Socket.IO 4 over a websocket (Engine.IO 4): join a room per channel, receive ``job`` and ``counts`` events."""

    __slots__ = ("stats", "chans", "counts_seq", "notify", "send", "await_state", "awaiting", "_joined")
    headers: list[str] = []

    def __init__(self, channels: Sequence[str], stats: Stats, await_state: bool = False) -> None:
        self.stats = stats
        self.chans: dict[str, dict[int, int]] = {name: {} for name in dict.fromkeys(channels)}
        self.counts_seq: dict[str, int] = {}  # a team room's seq of the counts held
        self.notify: Callable[[], None] = noop
        self.send: Callable[[bytes, bool], None] | None = None
        self.await_state = await_state
        self.awaiting: set[str] = set()  # channels whose state has not arrived on this connection yet
        self._joined = False

    @staticmethod
    def target(path: str, query: str) -> tuple[str, str]:
        if "socket.io" not in path:
            path = path.rstrip("/") + "/socket.io/"
        return path, with_query(query, "EIO=4&transport=websocket")

    def opened(self, send: Callable[[bytes, bool], None]) -> None:
        self.send = send
        self._joined = False

    def closed(self) -> None:
        self.send = None
        self._joined = False

    def ready(self) -> bool:
        return self._joined and not self.awaiting

    def raw_states(self) -> dict[str, Any]:
        return dict(self.chans)

    def states(self) -> dict[str, Any]:
        return {name: unpack_jobs(jobs) for name, jobs in self.chans.items()}

    def message(self, opcode: int, payload: bytes | bytearray, now: float) -> None:
        if not payload or self.send is None:
            return
        kind = payload[0]
        if kind == 0x34:  # "4": a Socket.IO packet
            sub = payload[1] if len(payload) > 1 else -1
            if sub == 0x32:  # "2": an event
                self._event(payload, now)
            elif sub == 0x30:  # "0": connected to the namespace: join the rooms
                for name in self.chans:
                    self.send(b'42["join",' + _json_encode(name) + b"]", False)
                self._joined = True
                self.awaiting = set(self.chans) if self.await_state else set()
                self.notify()
            elif sub == 0x34:  # "4": connect error
                self.stats.count(self.stats.errors, "connect_error")
            elif sub == 0x31:  # "1": disconnected from the namespace
                self.stats.count(self.stats.errors, "disconnect")
            else:
                self.stats.unknown += 1
        elif kind == 0x32:  # "2": Engine.IO ping
            self.stats.server_pings += 1
            self.send(b"3" + bytes(payload[1:]), False)
        elif kind == 0x30:  # "0": Engine.IO open: connect to the default namespace
            self.send(b"40", False)
        elif kind in (0x33, 0x36):  # pong, noop
            pass
        elif kind == 0x31:  # close
            self.stats.count(self.stats.errors, "engine_close")
        else:
            self.stats.unknown += 1

    def _event(self, payload: bytes | bytearray, now: float) -> None:
        start = 2
        n = len(payload)
        if start < n and payload[start] == 0x2F:  # "/nsp," prefix
            comma = payload.find(b",", start)
            start = comma + 1 if comma >= 0 else n
        while start < n and 0x30 <= payload[start] <= 0x39:  # ack id
            start += 1
        body = memoryview(payload)[start:]
        data: msgspec.Raw | None = None  # it holds on to `body`, which must be released before the next read
        try:
            name, data = _sio_event(body)
            if name == "job":
                self._jobs(_sio_job(data), now)
            elif name == "counts":
                self._counts(_sio_counts(data))
            elif name == "state":
                self._state(_sio_state(data))
            else:
                self.stats.unknown += 1
        except msgspec.ValidationError:
            self.stats.unknown += 1  # another event, or a payload of another shape
        except msgspec.DecodeError:
            self.stats.decode_errors += 1
        finally:
            data = None
            body.release()

    def _jobs(self, data: Change | list[Change], now: float) -> None:
        changes = data if isinstance(data, list) else (data,)
        chans = self.chans
        for c in changes:
            jobs = chans.get(c.channel) if c.channel is not None else None
            if jobs is None:
                self.stats.foreign += 1
                continue
            apply_changes(jobs, (c,), now, self.stats)

    def _state(self, m: PlainMessage) -> None:
        jobs = self.chans.get(m.channel)
        if jobs is None:
            self.stats.foreign += 1
            return
        apply_state(jobs, m.changes, self.stats)
        if m.channel in self.awaiting:
            self.awaiting.discard(m.channel)
            if not self.awaiting:
                self.notify()

    def _counts(self, c: _Counts) -> None:
        jobs = self.chans.get(c.channel)
        if jobs is None:
            self.stats.foreign += 1
            return
        apply_counts(jobs, c.counts, c.seq, self.counts_seq, c.channel)
