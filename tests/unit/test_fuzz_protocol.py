"""The wire protocol under hostile input: anything a client sends decodes to a message or a BadMessage with
a readable reason; nothing else escapes, nothing hangs."""

from __future__ import annotations

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.channels import BadChannel, parse_channel
from gateway.core.protocol import BadMessage, ClientMessages, decode_client, parse_cursor

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
messages = st.fixed_dictionaries(
    {"type": st.sampled_from(["subscribe", "unsubscribe", "ping", "pong", "batch", "", "SUBSCRIBE"])},
    optional={"channel": json_values | st.text(), "cursor": json_values, "id": json_values, "extra": json_values},
)


def decodes_or_refuses(data: bytes | str, fmt: str) -> None:
    try:
        message = decode_client(data, fmt)  # type: ignore[arg-type]
    except BadMessage as exc:
        assert str(exc)  # a reason a person can read
        return
    assert isinstance(message, ClientMessages.__args__)  # type: ignore[attr-defined]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_in_either_format(data: bytes) -> None:
    decodes_or_refuses(data, "msgpack")
    decodes_or_refuses(data, "json")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_well_formed_but_wrong_messages(message: dict[str, object]) -> None:
    decodes_or_refuses(msgspec.json.encode(message), "json")
    decodes_or_refuses(msgspec.msgpack.encode(message), "msgpack")


def test_deep_nesting_and_huge_numbers() -> None:
    decodes_or_refuses("[" * 5000 + "]" * 5000, "json")
    decodes_or_refuses('{"type": "ping", "id": ' + "9" * 5000 + "}", "json")
    decodes_or_refuses('{"type": "subscribe", "channel": "' + "\\ud800" + '"}', "json")


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60))
def test_channel_names_and_cursors_never_crash(name: str) -> None:
    try:
        channel = parse_channel(name)
        assert channel.name == name
    except BadChannel:
        pass
    position = parse_cursor(name)
    assert position is None or all(isinstance(p, int) and p >= 0 for p in position)
