"""What travels on the bus between the relay and the gateway nodes: one message, already encoded twice.

A node reads only the small header (epoch, seq) to order and fence; the payloads are written to
subscribers untouched, so a channel's message costs one encoding whatever the number of subscribers.
"""

from __future__ import annotations

import msgspec


class Envelope(msgspec.Struct, array_like=True):
    epoch: int
    seq: int
    json: bytes
    msgpack: bytes


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Envelope)


def pack(epoch: int, seq: int, json: bytes, msgpack: bytes) -> bytes:
    return _encoder.encode(Envelope(epoch, seq, json, msgpack))


def unpack(data: bytes) -> Envelope:
    return _decoder.decode(data)
