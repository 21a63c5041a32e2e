"""Coverage-guided fuzzing (atheris, libFuzzer) of what a client's bytes meet first: the websocket frame reader
(gateway/core/wsframe.py) and the protocol's decoders (gateway/core/protocol.py, channels, cursors).

    python -m tests.fuzz.fuzz_wire -max_total_time=600        # or -runs=N; a corpus folder to keep findings

What must hold for any input:
- `FrameReader.feed` returns complete messages or raises `ProtocolError` with 1002 or 1009, nothing else,
  with permessage-deflate negotiated or not (a compressed message inflates within the limit, or fails);
  no message is over the size limit, no control payload over 125 bytes, and it never holds more than the
  limit (plus a header) in its buffer. Fed the same bytes in any chunks, it gives the same messages (or the
  same error): a message never depends on how TCP split it.
- `decode_client` gives a client message or `BadMessage` with a reason, in JSON and in MessagePack;
  `parse_channel` a channel or `BadChannel`; `parse_cursor` a pair of ints or None.
The tests run a short bounded session of it (tests/unit/test_fuzz_atheris.py); hypothesis covers the same
decoders from the other side (tests/unit/test_fuzz_protocol.py).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from gateway.core.channels import BadChannel, parse_channel
    from gateway.core.protocol import BadMessage, ClientMessages, decode_client, parse_cursor
    from gateway.core.wsframe import FrameReader, ProtocolError

MAX_SIZE = 256  # small, so that the fuzzer reaches the size limit often


def read(data: bytes, cuts: list[int], inflate: bool = False) -> tuple[list[tuple[int, bytes]], int | None]:
    """Feed `data` in chunks ending at `cuts`: the messages, and the close code of the error if any."""
    reader = FrameReader(MAX_SIZE, inflate)
    messages: list[tuple[int, bytes]] = []
    start = 0
    try:
        for end in [*cuts, len(data)]:
            messages += reader.feed(data[start:end])
            start = end
            assert len(reader._buffer) <= MAX_SIZE + 14, "the reader holds more than one message's worth"
    except ProtocolError as exc:
        assert exc.code in (1002, 1009), exc.code
        return messages, exc.code
    return messages, None


def frames(fdp: atheris.FuzzedDataProvider) -> None:
    inflate = fdp.ConsumeBool()
    data = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 2048))
    cuts = sorted({fdp.ConsumeIntInRange(0, len(data)) for _ in range(fdp.ConsumeIntInRange(0, 8))})
    whole = read(data, [], inflate)
    for opcode, payload in whole[0]:
        assert len(payload) <= MAX_SIZE and (opcode not in (0x8, 0x9, 0xA) or len(payload) <= 125)
    chunked = read(data, cuts, inflate)
    # The same error, whatever the chunks; without one, the same messages. (With one, the connection closes:
    # what the chunks before the bad frame held may or may not have been handled, which no longer matters.)
    assert chunked[1] == whole[1], (data, cuts)
    if whole[1] is None:
        assert chunked[0] == whole[0], (data, cuts)


def messages(fdp: atheris.FuzzedDataProvider) -> None:
    raw = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 512))
    for fmt, data in (("json", raw), ("msgpack", raw), ("json", raw.decode("utf-8", "replace"))):
        try:
            message = decode_client(data, fmt)  # type: ignore[arg-type]
        except BadMessage as exc:
            assert str(exc)
        else:
            assert isinstance(message, ClientMessages.__args__)  # type: ignore[attr-defined]
    text = raw.decode("utf-8", "replace")
    try:
        parse_channel(text)
    except BadChannel:
        pass
    cursor = parse_cursor(text)
    assert cursor is None or all(isinstance(n, int) and n >= 0 for n in cursor)


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    (frames if fdp.ConsumeBool() else messages)(fdp)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
