"""The benchmark's subscriber clients: frame parsing and each dialect's state logic (no network)."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import time
import zlib
from datetime import UTC, datetime

import pytest

from bench import procstat
from bench.subscribers import FleetStates, Histogram, StateGroup, Stats, compare_states, merge_stats
from bench.subscribers.gateway_dialect import GatewayDialect
from bench.subscribers.jobstate import counts_state
from bench.subscribers.plain import PlainDialect
from bench.subscribers.socketio import SocketIODialect
from bench.subscribers.subscriber import source_address
from bench.subscribers.wsclient import (
    DEFLATE_OFFER,
    WSClient,
    accept_key,
    mask_frame,
    request_head,
    retry_delay,
)
from gateway.core.wsframe import OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT

# -- helpers


def server_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    n = len(payload)
    first = (0x80 if fin else 0) | opcode
    if n < 126:
        return bytes((first, n)) + payload
    if n < 1 << 16:
        return bytes((first, 126)) + n.to_bytes(2, "big") + payload
    return bytes((first, 127)) + n.to_bytes(8, "big") + payload


def parse_client_frames(data: bytes) -> list[tuple[int, bool, bytes]]:
    """(opcode, fin, unmasked payload) of each client frame; every one must be masked."""
    out, pos = [], 0
    while pos < len(data):
        b0, b1 = data[pos], data[pos + 1]
        assert b1 & 0x80, "client frames must be masked"
        n, pos = b1 & 0x7F, pos + 2
        if n == 126:
            n, pos = int.from_bytes(data[pos : pos + 2], "big"), pos + 2
        elif n == 127:
            n, pos = int.from_bytes(data[pos : pos + 8], "big"), pos + 8
        key, pos = data[pos : pos + 4], pos + 4
        out.append((b0 & 0x0F, bool(b0 & 0x80), bytes(b ^ key[i % 4] for i, b in enumerate(data[pos : pos + n]))))
        pos += n
    return out


class FakeTransport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


class Recorder:
    def __init__(self) -> None:
        self.stats = Stats()
        self.events: list[tuple] = []
        self.messages: list[tuple[int, bytes]] = []

    def ws_open(self, ws: WSClient) -> None:
        self.events.append(("open",))

    def ws_message(self, opcode: int, payload: bytes, now: float) -> None:
        self.messages.append((opcode, bytes(payload)))

    def ws_closed(self, ws: WSClient, code: int) -> None:
        self.events.append(("closed", code))

    def ws_refused(self, ws: WSClient, status: int, headers: dict, body: bytes) -> None:
        self.events.append(("refused", status, headers, body))

    def ws_failed(self, ws: WSClient, reason: str) -> None:
        self.events.append(("failed", reason))


def opened(headers: tuple[str, ...] = ()) -> tuple[WSClient, FakeTransport, Recorder]:
    rec = Recorder()
    ws = WSClient(rec, request_head("127.0.0.1", 9000, "/ws?channels=a", headers))
    transport = FakeTransport()
    ws.connection_made(transport)  # type: ignore[arg-type]
    request = bytes(transport.written)
    key = request.split(b"Sec-WebSocket-Key: ")[1].split(b"\r\n")[0]
    transport.written.clear()
    ws.data_received(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept_key(key) + b"\r\n\r\n"
    )
    assert rec.events == [("open",)]
    return ws, transport, rec


# -- the handshake


def test_upgrade_request_carries_key_and_headers() -> None:
    rec = Recorder()
    ws = WSClient(rec, request_head("127.0.0.1", 9000, "/ws?token=x", ["Authorization: Bearer t"]))
    transport = FakeTransport()
    ws.connection_made(transport)  # type: ignore[arg-type]
    request = bytes(transport.written).decode()
    assert request.startswith("GET /ws?token=x HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n")
    assert "Upgrade: websocket\r\n" in request and "Sec-WebSocket-Version: 13\r\n" in request
    assert "Authorization: Bearer t\r\n" in request and request.endswith("\r\n\r\n")
    key = request.split("Sec-WebSocket-Key: ")[1].split("\r\n")[0]
    assert len(base64.b64decode(key)) == 16


def test_bad_accept_fails_the_connection() -> None:
    rec = Recorder()
    ws = WSClient(rec, request_head("h", 1, "/ws"))
    transport = FakeTransport()
    ws.connection_made(transport)  # type: ignore[arg-type]
    ws.data_received(b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: nope\r\n\r\n")
    assert rec.events == [("failed", "bad_accept")] and transport.aborted


def test_503_refusal_reads_the_body_and_its_retry_delay() -> None:
    rec = Recorder()
    ws = WSClient(rec, request_head("h", 1, "/ws"))
    transport = FakeTransport()
    ws.connection_made(transport)  # type: ignore[arg-type]
    body = b'{"error":"busy","message":"too many new connections: retry shortly","retry_after_ms":750}'
    head = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: %d\r\n\r\n" % len(body)
    ws.data_received(head + body[:10])
    assert rec.events == []  # the body is not complete yet
    ws.data_received(body[10:])
    ((kind, status, headers, got),) = rec.events
    assert (kind, status, got) == ("refused", 503, body) and transport.closed
    assert retry_delay(status, headers, got) == 0.75
    assert 0.5 <= retry_delay(503, {"retry-after": "1"}, b"") <= 1.5  # type: ignore[operator]
    assert retry_delay(401, {}, b'{"error":"unauthorized"}') is None


def test_refusal_without_content_length_ends_with_the_connection() -> None:
    rec = Recorder()
    ws = WSClient(rec, request_head("h", 1, "/ws"))
    ws.connection_made(FakeTransport())  # type: ignore[arg-type]
    ws.data_received(b'HTTP/1.1 429 Too Many Requests\r\n\r\n{"error":')
    ws.data_received(b'"too_many_connections"}')
    ws.connection_lost(None)
    assert rec.events == [("refused", 429, {}, b'{"error":"too_many_connections"}')]


def test_connection_lost_before_the_answer_is_a_failure() -> None:
    rec = Recorder()
    ws = WSClient(rec, request_head("h", 1, "/ws"))
    ws.connection_made(FakeTransport())  # type: ignore[arg-type]
    ws.connection_lost(ConnectionResetError())
    assert rec.events == [("failed", "ConnectionResetError")]


# -- frames


def test_frames_in_the_same_packet_as_the_101() -> None:
    rec = Recorder()
    ws = WSClient(rec, request_head("h", 1, "/ws"))
    transport = FakeTransport()
    ws.connection_made(transport)  # type: ignore[arg-type]
    key = bytes(transport.written).split(b"Sec-WebSocket-Key: ")[1].split(b"\r\n")[0]
    ws.data_received(
        b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: "
        + accept_key(key)
        + b"\r\n\r\n"
        + server_frame(OP_TEXT, b"hello")
        + server_frame(OP_BINARY, b"\x00\x01")
    )
    assert rec.messages == [(OP_TEXT, b"hello"), (OP_BINARY, b"\x00\x01")]


def deflating(extensions: bytes) -> tuple[WSClient, FakeTransport, Recorder]:
    """A client whose 101 answered its permessage-deflate offer with `extensions`."""
    rec = Recorder()
    ws = WSClient(rec, request_head("h", 1, "/ws", [DEFLATE_OFFER]))
    transport = FakeTransport()
    ws.connection_made(transport)  # type: ignore[arg-type]
    assert b"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" in transport.written
    key = bytes(transport.written).split(b"Sec-WebSocket-Key: ")[1].split(b"\r\n")[0]
    ws.data_received(
        b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: "
        + accept_key(key)
        + b"\r\nSec-WebSocket-Extensions: "
        + extensions
        + b"\r\n\r\n"
    )
    return ws, transport, rec


def compressed_frame(opcode: int, payload: bytes, compressor: object = None, fin: bool = True) -> bytes:
    c = compressor or zlib.compressobj(6, zlib.DEFLATED, -15)
    data = (c.compress(payload) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]  # type: ignore[attr-defined]
    frame = server_frame(opcode, data, fin=fin)
    return bytes((frame[0] | 0x40,)) + frame[1:]


def test_compressed_messages_are_inflated_each_alone_without_context_takeover() -> None:
    ws, _, rec = deflating(b"permessage-deflate; server_no_context_takeover; client_no_context_takeover")
    big = b'{"jobs": [' + b'{"id": 1, "status": "running"}, ' * 100 + b"{}]}"
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    z = (c.compress(big) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]
    first = server_frame(OP_TEXT, z[:20], fin=False)
    fragmented = bytes((first[0] | 0x40,)) + first[1:] + server_frame(0x0, z[20:])  # RSV1 on the first frame only
    data = compressed_frame(OP_TEXT, big) + server_frame(OP_TEXT, b"plain") + fragmented  # RSV1 is per message
    for i in range(0, len(data), 9):
        ws.data_received(data[i : i + 9])
    assert rec.messages == [(OP_TEXT, big), (OP_TEXT, b"plain"), (OP_TEXT, big)]
    assert rec.stats.bytes < len(big)  # what came off the socket, compressed (the 101 included)


def test_compressed_messages_keep_one_context_when_the_server_takes_it_over() -> None:
    ws, _, rec = deflating(b"permessage-deflate")  # Node ws's default: the server's context carries over
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    ws.data_received(
        compressed_frame(OP_TEXT, b"hello " * 50, compressor) + compressed_frame(OP_TEXT, b"hello " * 50, compressor)
    )
    assert rec.messages == [(OP_TEXT, b"hello " * 50)] * 2


def test_rsv1_without_compression_negotiated_is_a_protocol_error() -> None:
    ws, _, rec = opened()
    ws.data_received(compressed_frame(OP_TEXT, b"x" * 100))
    assert rec.events[-1] == ("closed", 1002) and rec.messages == []


@pytest.mark.parametrize("size", [0, 125, 126, 300, 65535, 65536, 70000])
def test_7_16_and_64_bit_lengths(size: int) -> None:
    ws, _, rec = opened()
    payload = bytes(i & 0xFF for i in range(size))
    ws.data_received(server_frame(OP_BINARY, payload))
    assert rec.messages == [(OP_BINARY, payload)]
    assert ws.unread == 0  # nothing left over


def test_a_frame_split_across_reads() -> None:
    ws, _, rec = opened()
    data = server_frame(OP_TEXT, b"x" * 300) + server_frame(OP_TEXT, b"y" * 70000) + server_frame(OP_TEXT, b"z")
    for i in range(0, len(data), 7):  # header bytes split too
        ws.data_received(data[i : i + 7])
    assert rec.messages == [(OP_TEXT, b"x" * 300), (OP_TEXT, b"y" * 70000), (OP_TEXT, b"z")]
    assert rec.stats.messages == 3 and rec.stats.bytes > len(data)


def test_fragmented_message_with_a_ping_in_between() -> None:
    ws, transport, rec = opened()
    data = (
        server_frame(OP_TEXT, b'{"a":', fin=False)
        + server_frame(0x0, b"1,", fin=False)
        + server_frame(OP_PING, b"hb")
        + server_frame(0x0, b'"b":2}', fin=True)
    )
    ws.data_received(data[:9])
    ws.data_received(data[9:])
    assert rec.messages == [(OP_TEXT, b'{"a":1,"b":2}')]
    assert parse_client_frames(bytes(transport.written)) == [(OP_PONG, True, b"hb")]
    assert rec.stats.server_pings == 1 and rec.stats.frames == 4 and rec.stats.messages == 1


def test_ping_is_answered_with_a_masked_pong() -> None:
    ws, transport, _ = opened()
    ws.data_received(server_frame(OP_PING, b"\x00payload\xff"))
    raw = bytes(transport.written)
    assert raw[0] == 0x80 | OP_PONG and raw[1] & 0x80  # FIN pong, mask bit set
    assert parse_client_frames(raw) == [(OP_PONG, True, b"\x00payload\xff")]


def test_close_is_answered_and_reported() -> None:
    ws, transport, rec = opened()
    ws.data_received(
        server_frame(OP_CLOSE, (4008).to_bytes(2, "big") + b"slow consumer") + server_frame(OP_TEXT, b"late")
    )
    assert parse_client_frames(bytes(transport.written)) == [(OP_CLOSE, True, (4008).to_bytes(2, "big"))]
    assert transport.closed and rec.events[-1] == ("closed", 4008) and rec.messages == []
    ws.connection_lost(None)  # no second report
    assert rec.events[-1] == ("closed", 4008)


def test_dropped_connection_is_reported_as_1006() -> None:
    ws, _, rec = opened()
    ws.connection_lost(ConnectionResetError())
    assert rec.events[-1] == ("closed", 1006)


def test_continuation_without_a_start_is_a_protocol_error() -> None:
    ws, transport, rec = opened()
    ws.data_received(server_frame(0x0, b"orphan"))
    assert rec.events[-1] == ("closed", 1002) and rec.stats.protocol_errors == 1
    assert parse_client_frames(bytes(transport.written)) == [(OP_CLOSE, True, (1002).to_bytes(2, "big"))]


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 125, 126, 70000])
def test_client_frames_are_masked(size: int) -> None:
    payload = bytes((i * 7) & 0xFF for i in range(size))
    assert parse_client_frames(mask_frame(OP_TEXT, payload)) == [(OP_TEXT, True, payload)]


def test_send_writes_one_masked_frame() -> None:
    ws, transport, _ = opened()
    ws.send(b'{"type":"ping"}')
    ws.send(b"\x01\x02", binary=True)
    assert parse_client_frames(bytes(transport.written)) == [
        (OP_TEXT, True, b'{"type":"ping"}'),
        (OP_BINARY, True, b"\x01\x02"),
    ]


# -- the gateway dialect


def iso(ms: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{int(ms % 1000):03d}Z"


def job(id: int, version: int, status: str = "running", updated: float | None = None, removed: bool = False) -> dict:
    out = {
        "id": id,
        "team_id": 1,
        "trajectory_id": 17,
        "cluster_id": 1,
        "kind": "analysis",
        "name": "RDF",
        "status": status,
        "version": version,
        "attempts": 1,
        "error": None,
        "removed_at": None,
        "updated_at": iso(updated if updated is not None else time.time() * 1000),
    }
    if removed:
        out["removed_at"] = out["updated_at"]
    return out


class Sent(list):
    def __call__(self, data: bytes, binary: bool = False) -> None:
        self.append(json.loads(data))


def gateway(channels: tuple[str, ...] = ("trajectory:17",)) -> tuple[GatewayDialect, Sent, Stats]:
    stats = Stats()
    d = GatewayDialect(list(channels), stats)
    sent = Sent()
    d.opened(sent)
    return d, sent, stats


def feed(d, message: dict, now: float | None = None) -> None:
    d.message(OP_TEXT, json.dumps(message).encode(), time.time() * 1000 if now is None else now)


def snapshot(channel: str, seq: int, page: int, final: bool, jobs: list[dict], cursor: str | None = None) -> dict:
    return {
        "type": "snapshot",
        "channel": channel,
        "seq": seq,
        "cursor": cursor or f"1-{seq}",
        "time": 0,
        "page": page,
        "final": final,
        "jobs": jobs,
    }


def batch(channel: str, seq: int, jobs: list[dict]) -> dict:
    return {"type": "batch", "channel": channel, "seq": seq, "cursor": f"1-{seq}", "jobs": jobs, "groups": []}


def test_gateway_subscribes_then_pings() -> None:
    d, sent, _ = gateway(("trajectory:17", "team:3"))
    assert sent == [
        {"type": "subscribe", "channel": "trajectory:17"},
        {"type": "subscribe", "channel": "team:3"},
        {"type": "ping", "id": 1},
    ]
    assert GatewayDialect.target("/", "token=x") == ("/ws", "token=x")


def test_gateway_snapshot_pages_and_live() -> None:
    d, sent, stats = gateway()
    notified = []
    d.notify = lambda: notified.append(d.ready())
    ch = "trajectory:17"
    feed(d, snapshot(ch, 5, 0, False, [job(1, 1), job(2, 3, "queued")]))
    assert not d.ready()
    feed(d, snapshot(ch, 5, 1, False, [job(3, 1)]))
    feed(d, {**snapshot(ch, 5, 2, True, []), "groups": [{"key": "frame:1", "total": 1}]})  # a groups page
    assert not d.ready()  # no pong yet
    feed(d, {"type": "pong", "time": 1, "id": 1})
    assert d.ready() and notified[-1] is True
    assert d.states() == {ch: {1: (1, "running"), 2: (3, "queued"), 3: (1, "running")}}
    assert stats.snapshot_pages == 3 and stats.snapshot_jobs == 3 and stats.deltas == 0 and stats.latency.count == 0


def test_gateway_snapshot_page_0_replaces() -> None:
    d, _, _ = gateway()
    ch = "trajectory:17"
    feed(d, snapshot(ch, 5, 0, True, [job(1, 1), job(2, 1)]))
    feed(d, snapshot(ch, 9, 0, False, [job(2, 4, "completed")]))
    assert d.states() == {ch: {2: (4, "completed")}}
    assert d.chans[ch].pending


def test_gateway_batch_keeps_the_highest_version_and_measures_latency() -> None:
    d, _, stats = gateway()
    ch = "trajectory:17"
    feed(d, snapshot(ch, 5, 0, True, [job(1, 2), job(2, 1)]))
    now = time.time() * 1000
    feed(
        d,
        batch(
            ch,
            6,
            [job(1, 3, "completed", updated=now - 40), job(2, 1, "failed"), job(3, 1, "queued", updated=now - 10)],
        ),
        now=now,
    )
    assert d.states()[ch] == {1: (3, "completed"), 2: (1, "running"), 3: (1, "queued")}
    assert stats.deltas == 2 and stats.stale == 1
    assert stats.latency.count == 2 and abs(stats.latency.max - 40) < 1.5 and abs(stats.latency.min - 10) < 1.5
    feed(d, batch(ch, 7, [job(1, 2, "failed")]))  # an older version never wins
    assert d.states()[ch][1] == (3, "completed") and stats.stale == 2
    assert d.chans[ch].cursor == "1-7" and d.chans[ch].seq == 7


def test_gateway_removed_at_removes() -> None:
    d, _, stats = gateway()
    ch = "trajectory:17"
    feed(d, snapshot(ch, 5, 0, True, [job(1, 1), job(2, 1), job(4, 1, removed=True)]))
    assert set(d.states()[ch]) == {1, 2}  # a removed job in a snapshot is not listed
    feed(d, batch(ch, 6, [job(1, 2, removed=True)]))
    assert d.states()[ch] == {2: (1, "running")} and stats.removed == 1 and stats.deltas == 1


def test_gateway_resync_is_counted_and_subscribes_again_without_cursor() -> None:
    d, sent, stats = gateway()
    ch = "trajectory:17"
    feed(d, snapshot(ch, 5, 0, True, [job(1, 1)]))
    feed(d, {"type": "pong", "time": 1, "id": 1})
    assert d.ready()
    sent.clear()
    feed(d, {"type": "resync", "channel": ch, "reason": "slow_consumer"})
    assert stats.resyncs == 1 and not d.ready() and d.states()[ch] == {}
    assert sent == [{"type": "subscribe", "channel": ch}]
    feed(d, batch(ch, 6, [job(2, 1)]))  # not subscribed any more: ignored until the snapshot
    assert d.states()[ch] == {}
    feed(d, snapshot(ch, 8, 0, True, [job(1, 2)]))
    assert d.ready() and d.states()[ch] == {1: (2, "running")}


def test_gateway_seq_gap_and_duplicates() -> None:
    d, sent, stats = gateway()
    ch = "trajectory:17"
    feed(d, snapshot(ch, 5, 0, True, []))
    feed(d, batch(ch, 5, [job(1, 1)]))  # at or below the snapshot's seq
    assert stats.duplicates == 1 and d.states()[ch] == {}
    sent.clear()
    feed(d, batch(ch, 7, [job(1, 1)]))  # 6 was lost
    assert stats.gaps == 1 and sent == [{"type": "subscribe", "channel": ch}] and d.chans[ch].pending


def test_gateway_a_lost_snapshot_page_is_a_gap() -> None:
    d, sent, stats = gateway()
    ch = "trajectory:17"
    feed(d, snapshot(ch, 5, 0, False, [job(1, 1)]))
    sent.clear()
    feed(d, snapshot(ch, 5, 2, True, [job(3, 1)]))  # page 1 never came
    assert stats.gaps == 1 and sent == [{"type": "subscribe", "channel": ch}] and d.chans[ch].pending
    assert stats.snapshot_pages == 1 and d.states()[ch] == {1: (1, "running")}


def test_gateway_reconnect_resumes_with_cursor() -> None:
    d, sent, _ = gateway(("trajectory:17", "trajectory:18"))
    feed(d, snapshot("trajectory:17", 5, 0, True, [job(1, 1)], cursor="3-5"))
    feed(d, batch("trajectory:17", 6, [job(1, 2)]))
    feed(d, snapshot("trajectory:18", 2, 0, False, [job(9, 1)], cursor="3-2"))  # cut off mid-snapshot
    d.closed()
    sent.clear()
    d.opened(sent)
    assert sent == [
        {"type": "subscribe", "channel": "trajectory:17", "cursor": "1-6"},
        {"type": "subscribe", "channel": "trajectory:18"},
        {"type": "ping", "id": 2},
    ]
    feed(d, {"type": "pong", "time": 1, "id": 1})  # the previous connection's ping
    assert not d.ponged
    feed(d, batch("trajectory:17", 7, [job(1, 3)]))  # the replay continues the seq
    assert d.states()["trajectory:17"] == {1: (3, "running")}


async def test_gateway_unavailable_asks_again_with_the_cursor_not_for_a_snapshot() -> None:
    d, sent, stats = gateway()
    feed(d, snapshot("trajectory:17", 5, 0, True, [job(1, 1)], cursor="3-5"))
    feed(d, {"type": "pong", "time": 1, "id": 1})
    assert d.ready()
    sent.clear()
    feed(d, {"type": "error", "code": "unavailable", "message": "try again", "channel": "trajectory:17"})
    assert not d.ready()  # not live while its channel waits
    deadline = time.monotonic() + 10
    while not sent and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    # The same request again, from where it stood: a replay of what it missed, not a whole snapshot.
    assert sent == [{"type": "subscribe", "channel": "trajectory:17", "cursor": "3-5"}, {"type": "ping", "id": 2}]
    feed(d, batch("trajectory:17", 6, [job(1, 2)]))
    feed(d, {"type": "pong", "time": 2, "id": 2})
    assert d.ready() and d.states()["trajectory:17"] == {1: (2, "running")}
    assert stats.snapshot_pages == 1 and stats.gaps == 0


def test_gateway_team_channel_keeps_counts_and_summary_latency() -> None:
    d, _, stats = gateway(("team:3",))
    counts = {"queued": 1, "retrying": 0, "running": 2, "completed": 3, "failed": 0, "holding": 0, "preempted": 0}
    feed(
        d,
        {
            "type": "snapshot",
            "channel": "team:3",
            "seq": 4,
            "cursor": "1-4",
            "time": 0,
            "page": 0,
            "final": True,
            "counts": counts,
            "trajectories": [],
            "total_trajectories": 0,
        },
    )
    assert d.states() == {"team:3": counts}
    now = time.time() * 1000
    later = {**counts, "running": 1, "completed": 4}
    feed(
        d,
        {
            "type": "summary",
            "channel": "team:3",
            "seq": 5,
            "cursor": "1-5",
            "counts": later,
            "total_trajectories": 2,
            "trajectories": [
                {
                    "id": 1,
                    "name": "a",
                    "completed": 1,
                    "total": 2,
                    "status": "running",
                    "counts": later,
                    "updated_at": iso(now - 300),
                },
                {
                    "id": 2,
                    "name": "b",
                    "completed": 1,
                    "total": 2,
                    "status": "running",
                    "counts": later,
                    "updated_at": iso(now - 120),
                },
            ],
        },
        now=now,
    )
    assert d.states() == {"team:3": later} and stats.summaries == 1
    assert stats.summary_latency.count == 1 and abs(stats.summary_latency.max - 120) < 1.5
    for seq, kind in enumerate(("glow", "presence", "clusters", "notice"), start=6):
        feed(
            d,
            {
                "type": kind,
                "channel": "team:3",
                "seq": seq,
                "cursor": "c",
                "wave": 1,
                "trajectory_id": 1,
                "presence": {},
                "clusters": {},
                "title": "t",
                "level": "success",
            },
        )
    assert d.chans["team:3"].seq == 9 and stats.gaps == 0 and stats.latency.count == 0


def test_gateway_errors_and_unknown_messages() -> None:
    d, _, stats = gateway()
    feed(d, {"type": "error", "code": "forbidden", "message": "no", "channel": "trajectory:17"})
    feed(d, {"type": "error", "code": "rate_limited", "message": "slow down"})
    assert stats.errors == {"forbidden": 1, "rate_limited": 1}
    assert d.chans["trajectory:17"].failed == "forbidden" and not d.ready()
    feed(d, snapshot("trajectory:17", 1, 0, True, []))
    feed(d, {"type": "novelty", "channel": "trajectory:17", "seq": 2, "cursor": "1-2"})
    assert stats.unknown == 1 and d.chans["trajectory:17"].seq == 2
    d.message(OP_TEXT, b"{not json", 0.0)
    assert stats.decode_errors == 1


def test_gateway_msgpack() -> None:
    import msgspec

    stats = Stats()
    d = GatewayDialect(["trajectory:17"], stats, fmt="msgpack")
    sent: list[tuple[bytes, bool]] = []
    d.opened(lambda data, binary: sent.append((data, binary)))
    assert all(binary for _, binary in sent) and msgspec.msgpack.decode(sent[0][0]) == {
        "type": "subscribe",
        "channel": "trajectory:17",
    }
    assert d.headers == ["Sec-WebSocket-Protocol: msgpack"]
    from datetime import datetime

    message = {
        "type": "snapshot",
        "channel": "trajectory:17",
        "seq": 1,
        "cursor": "1-1",
        "time": 0,
        "page": 0,
        "final": True,
        "jobs": [{"id": 5, "version": 2, "status": "failed", "updated_at": datetime.now(UTC), "removed_at": None}],
    }
    d.message(OP_BINARY, msgspec.msgpack.encode(message), 0.0)
    assert d.states() == {"trajectory:17": {5: (2, "failed")}}


# -- plain


def stamp(ms: float) -> str:
    """A job's `updated_at` as PostgreSQL's to_jsonb writes it, `ms` milliseconds since the epoch."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def test_plain_target_and_changes() -> None:
    stats = Stats()
    d = PlainDialect(["team:3", "trajectory:17"], stats)
    assert d.target("", "") == ("/ws", "channels=team:3,trajectory:17")
    assert d.target("/ws", "x=1") == ("/ws", "x=1&channels=team:3,trajectory:17")
    assert not d.ready()
    d.opened(Sent())
    assert d.ready()
    now = time.time() * 1000
    job = {"team_id": 3, "trajectory_id": 17, "cluster_id": 1, "kind": "preprocess", "name": "Preprocess frame 0"}
    frame = {
        "channel": "trajectory:17",
        "changes": [
            {**job, "id": 1, "version": 2, "status": "running", "updated_at": stamp(now - 25), "frame": 0},
            {**job, "id": 2, "version": 1, "status": "queued", "updated_at": stamp(now - 5)},
        ],
    }
    d.message(OP_TEXT, json.dumps(frame).encode(), now)
    d.message(
        OP_TEXT,
        json.dumps(
            {
                "channel": "trajectory:17",
                "changes": [{"id": 1, "version": 1, "status": "failed", "updated_at": stamp(now)}],
            }
        ).encode(),
        now,
    )
    d.message(
        OP_TEXT,
        json.dumps(
            {"channel": "trajectory:17", "changes": [{"id": 2, "version": 2, "status": "queued", "removed": True}]}
        ).encode(),
        now,
    )
    d.message(OP_TEXT, json.dumps({"channel": "trajectory:99", "changes": []}).encode(), now)
    assert d.states() == {"team:3": {}, "trajectory:17": {1: (2, "running")}}
    assert stats.deltas == 3 and stats.stale == 1 and stats.removed == 1 and stats.foreign == 1
    assert stats.latency.count == 2 and abs(stats.latency.max - 25) < 0.5 and abs(stats.latency.min - 5) < 0.5
    d.message(OP_TEXT, b'{"changes": "nope"}', now)
    assert stats.decode_errors == 1


def test_plain_team_room_keeps_the_counts_of_its_latest_message() -> None:
    d = PlainDialect(["team:3"], Stats())
    d.opened(Sent())
    counts = dict.fromkeys(["queued", "retrying", "running", "completed", "failed", "holding", "preempted"], 0)
    change = {"id": 7, "version": 2, "status": "running"}
    later = {"channel": "team:3", "changes": [change], "counts": {**counts, "running": 1}, "seq": 2}
    earlier = {"channel": "team:3", "changes": [], "counts": {**counts, "queued": 1}, "seq": 1}
    for message in (later, earlier):  # the tap's connections publish concurrently: seq orders the counts
        d.message(OP_TEXT, json.dumps(message).encode(), 0)
    assert d.states() == {"team:3": {7: (2, "running")} | counts_state({**counts, "running": 1})}
    # Without a seq (broadcaster-pg's NOTIFY arrives in commit order), the latest counts are kept.
    d = PlainDialect(["team:3"], Stats())
    d.opened(Sent())
    d.message(OP_TEXT, json.dumps({"channel": "team:3", "changes": [change], "counts": counts}).encode(), 0)
    d.message(OP_TEXT, json.dumps({"channel": "team:3", "changes": [], "counts": {**counts, "failed": 1}}).encode(), 0)
    assert d.states()["team:3"] == {7: (2, "running")} | counts_state({**counts, "failed": 1})


def test_plain_state_at_connect_is_a_snapshot_and_with_await_state_makes_the_subscriber_live() -> None:
    stats = Stats()
    notified: list[bool] = []
    d = PlainDialect(["team:3", "trajectory:17"], stats, await_state=True)
    d.notify = lambda: notified.append(d.ready())
    d.opened(Sent())
    assert not d.ready()  # open, but no state yet
    now = time.time() * 1000
    change = {"id": 1, "version": 3, "status": "running", "updated_at": stamp(now - 5)}
    d.message(OP_TEXT, json.dumps({"channel": "trajectory:17", "changes": [change]}).encode(), now)
    old = {"updated_at": stamp(now - 60_000)}  # a state's jobs changed long ago: no latency from them
    state = {
        "channel": "trajectory:17",
        "changes": [
            {**old, "id": 1, "version": 2, "status": "queued"},
            {**old, "id": 2, "version": 1, "status": "queued"},
        ],
        "groups": [{"key": "frame:0", "label": "Frame 0", "total": 2}],
        "seq": 4,
        "state": True,
    }
    d.message(OP_TEXT, json.dumps(state).encode(), now)
    assert not d.ready()  # team:3's state has not come yet
    d.message(OP_TEXT, json.dumps({"channel": "team:3", "changes": [], "state": True}).encode(), now)
    assert d.ready() and notified[-1]
    # The change that came before the state is kept: its version is newer.
    assert d.states() == {"team:3": {}, "trajectory:17": {1: (3, "running"), 2: (1, "queued")}}
    assert stats.deltas == 1 and stats.latency.count == 1 and stats.stale == 0
    assert stats.snapshot_pages == 2 and stats.snapshot_jobs == 1
    d.closed()
    d.opened(Sent())  # a new connection awaits its own states
    assert not d.ready()
    # Without await_state (steady and burst, where no state is kept), live at the handshake.
    d = PlainDialect(["team:3"], Stats())
    d.opened(Sent())
    assert d.ready()


# -- socketio


def test_socketio_handshake_joins_pings_and_events() -> None:
    stats = Stats()
    d = SocketIODialect(["team:3", "trajectory:17"], stats)
    assert d.target("/", "") == ("/socket.io/", "EIO=4&transport=websocket")
    sent: list[bytes] = []
    d.opened(lambda data, binary: sent.append(data))
    d.message(OP_TEXT, b'0{"sid":"abc","upgrades":[],"pingInterval":25000,"pingTimeout":20000,"maxPayload":1000000}', 0)
    assert sent == [b"40"] and not d.ready()
    d.message(OP_TEXT, b'40{"sid":"def"}', 0)
    assert sent[1:] == [b'42["join","team:3"]', b'42["join","trajectory:17"]'] and d.ready()
    d.message(OP_TEXT, b"2", 0)
    assert sent[-1] == b"3" and stats.server_pings == 1
    now = time.time() * 1000
    change = {"id": 7, "version": 3, "status": "completed", "updated_at": stamp(now - 12), "channel": "trajectory:17"}
    d.message(OP_TEXT, b"42" + json.dumps(["job", change]).encode(), now)
    d.message(OP_TEXT, b"42" + json.dumps(["job", {**change, "version": 2, "status": "running"}]).encode(), now)
    d.message(OP_TEXT, b"42" + json.dumps(["job", {**change, "id": 8, "channel": "trajectory:99"}]).encode(), now)
    d.message(OP_TEXT, b"42" + json.dumps(["other", {"x": 1}]).encode(), now)
    d.message(OP_TEXT, b"42/admin,5" + json.dumps(["job", {**change, "id": 9, "version": 1}]).encode(), now)
    counts = {"channel": "team:3", "seq": 4, "counts": {"queued": 2, "running": 1}}
    d.message(OP_TEXT, bytearray(b"42" + json.dumps(["counts", counts]).encode()), now)  # the reader's buffer
    d.message(OP_TEXT, b"42" + json.dumps(["counts", {**counts, "seq": 3, "counts": {"queued": 3}}]).encode(), now)
    d.message(OP_TEXT, b"42" + json.dumps(["job", {"id": "x"}]).encode(), now)
    d.message(OP_TEXT, b'42["job",{', now)
    assert d.states() == {
        "team:3": counts_state({"queued": 2, "running": 1}),
        "trajectory:17": {7: (3, "completed"), 9: (1, "completed")},
    }
    assert stats.deltas == 2 and stats.stale == 1 and stats.foreign == 1 and stats.unknown == 2
    assert stats.decode_errors == 1
    assert stats.latency.count == 2 and abs(stats.latency.max - 12) < 0.5
    d.closed()
    assert not d.ready()


def test_socketio_state_event_is_applied_and_with_await_state_makes_the_subscriber_live() -> None:
    stats = Stats()
    d = SocketIODialect(["trajectory:17"], stats, await_state=True)
    sent: list[bytes] = []
    d.opened(lambda data, binary: sent.append(data))
    d.message(OP_TEXT, b'0{"sid":"abc","upgrades":[],"pingInterval":25000,"pingTimeout":20000}', 0)
    d.message(OP_TEXT, b'40{"sid":"def"}', 0)
    assert sent[-1] == b'42["join","trajectory:17"]' and not d.ready()
    state = {"channel": "trajectory:17", "changes": [{"id": 5, "version": 2, "status": "completed"}], "state": True}
    d.message(OP_TEXT, b"42" + json.dumps(["state", state]).encode(), 0)
    assert d.ready() and d.states() == {"trajectory:17": {5: (2, "completed")}}
    assert stats.deltas == 0 and stats.snapshot_pages == 1 and stats.unknown == 0
    d.message(OP_TEXT, b"42" + json.dumps(["state", {**state, "channel": "trajectory:99"}]).encode(), 0)
    assert stats.foreign == 1


# -- latency histogram, merging, state comparison


def test_histogram_percentiles_are_close_and_merge() -> None:
    import random

    rnd = random.Random(7)
    values = [rnd.lognormvariate(3, 1) for _ in range(20000)] + [0.0002, 0.1]
    a, b = Histogram(), Histogram()
    for i, v in enumerate(values):
        (a if i % 2 else b).add(v)
    merged = merge_stats([{"latency": a}, {"latency": b}])["latency"]
    values.sort()
    for q in (50, 90, 99, 99.9):
        exact = values[max(0, math.ceil(len(values) * q / 100) - 1)]
        got = merged.percentile(q)
        assert abs(got - exact) <= max(0.004 * exact, 0.001), (q, got, exact)
    assert merged.count == len(values) and merged.max == values[-1] and merged.min == values[0]
    assert merged.percentile(100) == values[-1]
    h = Histogram()
    h.add(-3.0)
    assert h.negative == 1 and h.summary()["min"] == -3.0
    assert Histogram().summary()["p99"] is None


def test_merge_stats_adds_counters_and_tables() -> None:
    a, b = Stats(), Stats()
    a.deltas, b.deltas = 3, 4
    a.count(a.closes, 1006)
    b.count(b.closes, 1006)
    b.count(b.failures, "503")
    merged = merge_stats([{**a.export(), "live": 1}, {**b.export(), "live": 2}])
    assert (
        merged["deltas"] == 7
        and merged["closes"] == {1006: 2}
        and merged["failures"] == {"503": 1}
        and merged["live"] == 3
    )


def test_compare_states() -> None:
    want = {1: (2, "running"), 2: (1, "queued")}
    states = FleetStates(
        {
            "trajectory:17": [
                StateGroup(dict(want), 5, [0, 2]),
                StateGroup({1: (1, "queued"), 3: (1, "queued")}, 1, [4]),
            ],
            "team:3": [StateGroup({"queued": 1}, 2, [1])],
        },
        {"trajectory:17": 1},
    )
    report = compare_states(states, {"trajectory:17": want, "team:3": {"queued": 1}, "trajectory:18": {}})
    t = report["trajectory:17"]
    assert (t["subscribers"], t["equal"], t["differ"], t["not_live"]) == (6, 5, 1, 1)
    assert (
        t["missing"] == [2]
        and t["extra"] == [3]
        and t["wrong"] == [(1, (1, "queued"), (2, "running"))]
        and t["examples"] == [4]
    )
    assert report["team:3"]["equal"] == 2 and report["team:3"]["differ"] == 0
    assert report["trajectory:18"]["subscribers"] == 0


# -- procstat


def test_procstat_reads_this_process() -> None:
    import os

    cpu, rss = procstat.measure([os.getpid()])
    assert cpu > 0 and rss > 1000
    assert procstat.cpu_seconds([os.getpid(), 2**22 + 12345]) >= cpu  # a vanished pid is skipped
    assert procstat.rss_kb([2**22 + 12345]) == 0


def test_exact_cpu_counts_below_a_tick() -> None:
    """A PostgreSQL backend's share of a short run is a few milliseconds: /proc/<pid>/stat's 10 ms ticks read it
    as 0 or 10; schedstat reads what ran."""
    import os
    import time

    before = procstat.exact_cpu_seconds(os.getpid())
    start = time.thread_time()
    while time.thread_time() - start < 0.003:  # 3 ms of CPU, less than a tick
        pass
    spent = procstat.exact_cpu_seconds(os.getpid()) - before
    assert 0.003 <= spent < 0.5  # what ran (to the nanosecond), not rounded to a tick
    assert spent * 1e6 != int(spent * 100) * 1e4  # not a whole number of 10 ms ticks
    assert procstat.exact_cpu_seconds(2**22 + 12345) == 0.0  # a vanished pid reads as nothing


def test_loopback_subscribers_spread_over_source_addresses() -> None:
    # 16,000 connections to one port would exhaust one source address's ephemeral ports: 256 share each.
    assert source_address("127.0.0.1", 0) == ("127.1.0.1", 0) == source_address("127.0.0.1", 255)
    assert source_address("127.0.0.1", 256) == ("127.1.0.2", 0)
    assert len({source_address("127.0.0.1", i) for i in range(16_000)}) == 63
    assert all(source_address(host, 0) is None for host in ("example.org", "::1", "10.0.0.1"))
