"""The wire protocol under hostile input: anything a client sends decodes to a message or a BadMessage with
a readable reason; nothing else escapes, nothing hangs."""

from __future__ import annotations

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.channels import BadChannel, parse_channel
from gateway.core.protocol import BadMessage, ClientMessages, decode_client, parse_cursor

# Ids around and past a bigint, and NUL: what PostgreSQL cannot take must never get that far.
edge_ints = st.sampled_from([0, 2**63 - 1, 2**63, 2**64 - 1, -(2**63)]) | st.integers(
    min_value=2**63, max_value=2**64 - 1
)
nul_texts = st.builds(lambda a, b: f"{a}\x00{b}", st.text(max_size=10), st.text(max_size=10))
# Channel names and cursors that look almost right: a known kind, then an id that is too big, signed, padded,
# not ASCII, or has a NUL.
id_texts = st.one_of(
    edge_ints.map(str),
    st.integers(min_value=2**63, max_value=2**200).map(str),
    st.integers(max_value=-1).map(str),
    st.builds(
        lambda n, pad: f"{pad}{n}",
        st.integers(min_value=0, max_value=99),
        st.sampled_from(["0", "00", " ", "+", "\x00"]),
    ),
    st.builds(lambda n, tail: f"{n}{tail}", st.integers(min_value=1), st.sampled_from(["\x00", "²", "١", " ", ".0"])),
    st.sampled_from(["²", "١٢", "𝟙", "\x00"]),
)
channel_names = st.builds(
    lambda kind, ident: f"{kind}:{ident}", st.sampled_from(["team", "team-jobs", "trajectory", "", "x\x00"]), id_texts
)
cursors = st.builds(lambda a, b: f"{a}-{b}", id_texts, id_texts)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | edge_ints
    | st.floats(allow_nan=False)
    | st.text()
    | nul_texts,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
messages = st.fixed_dictionaries(
    {"type": st.sampled_from(["subscribe", "unsubscribe", "ping", "pong", "batch", "", "SUBSCRIBE"])},
    optional={
        "channel": json_values | st.text() | channel_names,
        "cursor": json_values | cursors,
        "id": json_values | nul_texts,
        "extra": json_values,
    },
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


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=2**64), st.sampled_from(["id", "channel", "cursor"]))
def test_integers_past_what_msgpack_holds_in_json(n: int, field: str) -> None:
    """JSON has no bound on an integer (MessagePack stops at 2**64 - 1, so only JSON can carry these)."""
    decodes_or_refuses(b'{"type": "subscribe", "channel": "team:1", "%s": %d}' % (field.encode(), n), "json")
    decodes_or_refuses(b'{"type": "ping", "%s": %d}' % (field.encode(), n), "json")


def test_deep_nesting_and_huge_numbers() -> None:
    decodes_or_refuses("[" * 5000 + "]" * 5000, "json")
    decodes_or_refuses('{"type": "ping", "id": ' + "9" * 5000 + "}", "json")
    decodes_or_refuses('{"type": "subscribe", "channel": "' + "\\ud800" + '"}', "json")


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60) | channel_names | cursors | nul_texts)
def test_channel_names_and_cursors_never_crash(name: str) -> None:
    try:
        channel = parse_channel(name)
        assert channel.name == name
    except BadChannel:
        pass
    position = parse_cursor(name)
    assert position is None or all(isinstance(p, int) and p >= 0 for p in position)
