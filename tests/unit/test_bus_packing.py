"""The bus's connections pack a command into exactly the bytes redis-py packs, each argument copied once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

from gateway.bus.packing import one_join

_argument = st.one_of(
    st.binary(max_size=50),
    st.binary(min_size=5990, max_size=7000),  # around redis-py's 6,000-byte cutoff: chunks of their own
    st.text(max_size=30),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.binary(max_size=9000).map(memoryview),
)
_name = st.sampled_from(["EVALSHA", "SET", "CONFIG GET", b"XADD", b"CLIENT  SETNAME"])


@settings(max_examples=300, deadline=None)
@given(_name, st.lists(_argument, max_size=40))
def test_a_command_packs_to_the_bytes_redis_py_packs(name: str | bytes, args: list[object]) -> None:
    ours, theirs = one_join(Connection)(), Connection()
    packed = ours.pack_command(name, *args)
    assert b"".join(packed) == b"".join(theirs.pack_command(name, *args))
    assert b"".join(ours.pack_commands([(name, *args), ("PING",)])) == b"".join(
        theirs.pack_commands([(name, *args), ("PING",)])
    )


def test_a_cycle_of_small_arguments_is_one_buffer_and_a_large_value_is_not_copied() -> None:
    connection = one_join(Connection)()
    small = [b"x" * 400] * 100  # a relay cycle's envelopes: 40 KB in all, each under the cutoff
    assert len(connection.pack_command("EVALSHA", *small)) == 1
    big = memoryview(b"y" * 100_000)
    packed = connection.pack_command("SET", "k", big)
    assert any(chunk is big for chunk in packed)


def test_the_url_s_kind_of_connection_is_kept() -> None:
    for kind in (Connection, SSLConnection, UnixDomainSocketConnection):
        packing = one_join(kind)
        assert issubclass(packing, kind) and one_join(kind) is packing
