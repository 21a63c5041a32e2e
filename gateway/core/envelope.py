"""What travels on the bus between the relay and the gateway nodes: one message, already encoded twice.

A node reads only the small header (epoch, seq) to order and fence; the payloads are written to
subscribers untouched, so a channel's message costs one encoding whatever the number of subscribers.
The MessagePack payload stays the array's last field: the relay's publish script cuts the history entry
from the envelope's tail (gateway.bus.publisher). `message_frame` makes a subscriber's frame of a message,
whether it came with the envelope or from the history.

A relay that traces (gateway.tracing) sends a `Traced` envelope instead: the same with its publish span's W3C
`traceparent` after the header. Untraced, the envelope is byte for byte what it was: tracing off costs nothing
here. (A node from before `Traced` drops traced messages as undecodable: upgrade nodes first, as always.)
"""

from __future__ import annotations

import msgspec

from .protocol import Format, msgpack_to_json
from .wsframe import Frame


class Envelope(msgspec.Struct, array_like=True):
    epoch: int
    seq: int
    # The relay's clock when it published (Unix seconds; 0: unknown): nodes measure publish to write from it.
    published: float
    # The commit time (PostgreSQL's clock) of the oldest change the relay's cycle published (0: none, or unknown):
    # nodes measure commit to write from it (gateway_delivery_lag_seconds).
    committed: float
    json: bytes
    msgpack: bytes


class Traced(msgspec.Struct, array_like=True):
    """An envelope with the trace context of the relay's publish (a string where `Envelope` has its bytes, so
    neither decodes as the other)."""

    epoch: int
    seq: int
    published: float
    committed: float
    trace: str
    json: bytes
    msgpack: bytes


class _TraceStamp(msgspec.Struct, array_like=True):
    """A traced envelope's header and trace alone."""

    epoch: int
    seq: int
    published: float
    committed: float
    trace: str


class _Published(msgspec.Struct, array_like=True):
    """A relay from before `committed` (a node upgraded first decodes it still)."""

    epoch: int
    seq: int
    published: float
    json: bytes
    msgpack: bytes


class _Legacy(msgspec.Struct, array_like=True):
    """A relay from before `published` (a node upgraded first decodes it still)."""

    epoch: int
    seq: int
    json: bytes
    msgpack: bytes


class _Stamp(msgspec.Struct, array_like=True):
    """The header alone: the payloads that follow are skipped, not copied."""

    epoch: int
    seq: int
    published: float
    committed: float


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Envelope)
_published_decoder = msgspec.msgpack.Decoder(_Published)
_legacy_decoder = msgspec.msgpack.Decoder(_Legacy)
_stamp_decoder = msgspec.msgpack.Decoder(_Stamp)
_traced_decoder = msgspec.msgpack.Decoder(Traced)
_trace_decoder = msgspec.msgpack.Decoder(_TraceStamp)


def pack(
    epoch: int,
    seq: int,
    json: bytes,
    msgpack: bytes,
    published: float = 0.0,
    committed: float = 0.0,
    trace: str | None = None,
) -> bytes:
    if trace is not None:
        return _encoder.encode(Traced(epoch, seq, published, committed, trace, json, msgpack))
    return _encoder.encode(Envelope(epoch, seq, published, committed, json, msgpack))


def unpack(data: bytes) -> Envelope:
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError:
        pass
    try:
        traced = _traced_decoder.decode(data)
        return Envelope(traced.epoch, traced.seq, traced.published, traced.committed, traced.json, traced.msgpack)
    except msgspec.ValidationError:
        pass
    try:
        older = _published_decoder.decode(data)
        return Envelope(older.epoch, older.seq, older.published, 0.0, older.json, older.msgpack)
    except msgspec.ValidationError:
        old = _legacy_decoder.decode(data)
        return Envelope(old.epoch, old.seq, 0.0, 0.0, old.json, old.msgpack)


def stamps(data: bytes) -> tuple[float, float]:
    """When the relay published this envelope and when its cycle's oldest change committed (0.0: not said)."""
    try:
        stamp = _stamp_decoder.decode(data)
        return stamp.published, stamp.committed
    except msgspec.DecodeError:  # an older envelope (see `_Published`, `_Legacy`), or not one of ours
        return 0.0, 0.0


def trace_of(data: bytes) -> str | None:
    """The traceparent of the relay's publish a traced envelope carries (None: not traced)."""
    try:
        return _trace_decoder.decode(data).trace
    except msgspec.DecodeError:
        return None


def published_at(data: bytes) -> float:
    """When the relay published this envelope (0.0 when it did not say)."""
    return stamps(data)[0]


def message_frame(msgpack: bytes, fmt: Format, json: bytes | None = None) -> Frame:
    """A channel message as the frame subscribers in `fmt` are sent: MessagePack as it is, JSON as the relay
    encoded it (`json`, when the bus carried it) or transcoded from the MessagePack (the history keeps only that)."""
    if fmt == "msgpack":
        return Frame(msgpack, text=False)
    return Frame(json if json is not None else msgpack_to_json(msgpack), text=True)
