"""A connection's pending output: bounded; past the bound a live frame is refused (the connection lags and
catches up from history), and a connection still past it after a resync, before draining once, is closed."""

from gateway.core import envelope
from gateway.core.outbound import Outbound, Verdict
from gateway.core.protocol import Batch, encode_both, make_cursor
from gateway.core.wsframe import Frame
from gateway.hub.connection import Connection
from gateway.hub.hub import Hub

CHANNEL = "trajectory:1"


def test_frames_queue_until_the_bound() -> None:
    out = Outbound(limit=10)
    assert out.push(b"12345") is Verdict.QUEUED
    assert out.push(b"12345") is Verdict.QUEUED
    assert out.size == 10 and len(out) == 2


def test_over_the_bound_a_live_frame_is_refused_and_what_is_pending_stays() -> None:
    out = Outbound(limit=10)
    out.push(b"12345678")
    assert out.push(b"abcdef") is Verdict.LAG
    assert out.size == 8 and len(out) == 1
    assert out.push(b"abcdef") is Verdict.LAG  # lagging again is not a reason to close
    assert [out.pop(), out.pop()] == [b"12345678", None]


def test_past_the_bound_after_a_resync_before_draining_means_close() -> None:
    out = Outbound(limit=10)
    out.resyncing = True  # the connection was told to resync as a slow consumer
    out.push(b"12345678")
    assert out.push(b"abcdef") is Verdict.CLOSE


def test_draining_once_forgives_the_resync() -> None:
    out = Outbound(limit=10)
    out.resyncing = True
    out.push(b"123")
    assert out.pop() == b"123"
    assert out.pop() is None  # drained
    out.push(b"12345678")
    assert out.push(b"abcdef") is Verdict.LAG


def test_an_empty_queue_takes_one_oversize_frame_and_forced_frames_always_go_in() -> None:
    out = Outbound(limit=4)
    assert out.push(b"123456789") is Verdict.QUEUED
    assert out.push(b"resync", force=True) is Verdict.QUEUED
    assert [out.pop(), out.pop(), out.pop()] == [b"123456789", b"resync", None]


def test_frames_are_shared_references_not_copies() -> None:
    """A live message delivered by the hub to many slow connections (their frames wait in their outbound): every
    queue holds the one Frame object, whose bytes are the message's own, never copied, and framed once."""
    frame = b"x" * 100
    a, b = Outbound(1000), Outbound(1000)
    a.push(frame)
    b.push(frame)
    assert a.pop() is b.pop() is frame  # the queue itself keeps references
    hub = Hub()
    as_json, as_msgpack = encode_both(Batch(channel=CHANNEL, seq=1, cursor=make_cursor(1, 1), jobs=[]))
    data = envelope.pack(1, 1, as_json, as_msgpack)
    json_conns = [Connection(user_id=i, fmt="json", max_pending=1 << 20) for i in range(50)]
    msgpack_conns = [Connection(user_id=i, fmt="msgpack", max_pending=1 << 20) for i in range(50)]
    for c in json_conns + msgpack_conns:  # unlinked: what the hub delivers waits in the outbound
        c.channels[CHANNEL] = 1
        hub.add(c, CHANNEL)
    hub.on_message(CHANNEL, data)
    json_frames = [c.take() for c in json_conns]
    msgpack_frames = [c.take() for c in msgpack_conns]
    json_frame, msgpack_frame = json_frames[0], msgpack_frames[0]
    assert isinstance(json_frame, Frame) and isinstance(msgpack_frame, Frame)
    assert all(f is json_frame for f in json_frames) and all(f is msgpack_frame for f in msgpack_frames)
    assert json_frame.data == as_json and msgpack_frame.data == as_msgpack
    # The payloads are the bytes decoded from the bus envelope once, not a copy per connection; the websocket
    # framing is built once too, and what an ASGI link sends of a binary frame is the payload itself.
    assert len({id(f.data) for f in json_frames}) == 1 and len({id(f.data) for f in msgpack_frames}) == 1
    assert json_frames[1].wire is json_frames[-1].wire and msgpack_frames[1].wire is msgpack_frames[-1].wire
    assert msgpack_frames[-1].asgi is msgpack_frame.data


def test_forced_frames_do_not_count_against_the_live_bound() -> None:
    out = Outbound(limit=10)
    out.push(b"x" * 100, force=True)  # a snapshot page
    assert out.push(b"12345") is Verdict.QUEUED
    assert out.push(b"12345") is Verdict.QUEUED
    assert out.push(b"1") is Verdict.LAG  # the live frames alone pass the bound
