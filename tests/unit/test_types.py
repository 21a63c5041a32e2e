"""The shared field types: what a decode lets through, PostgreSQL can store; the refusal names the field."""

from __future__ import annotations

import msgspec
import pytest

from gateway.core.types import MAX_ID, Id, Text, is_id


class Named(msgspec.Struct):
    id: Id
    name: Text


_decoder = msgspec.json.Decoder(Named)


def test_the_largest_bigint_is_an_id() -> None:
    assert _decoder.decode(b'{"id": 9223372036854775807, "name": "x"}').id == MAX_ID == 2**63 - 1
    assert is_id(MAX_ID) and is_id(1)


@pytest.mark.parametrize("value", [2**63, 2**64, 10**30])
def test_an_id_past_a_bigint_is_refused_at_its_field(value: int) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        _decoder.decode(b'{"id": %d, "name": "x"}' % value)
    assert str(info.value) == "Expected `int` <= 9223372036854775807 - at `$.id`"
    assert not is_id(value)


@pytest.mark.parametrize("value", [0, -1, -(2**63) - 1])
def test_an_id_is_positive(value: int) -> None:
    with pytest.raises(msgspec.ValidationError, match=r"Expected `int` >= 1 - at `\$.id`"):
        _decoder.decode(b'{"id": %d, "name": "x"}' % value)
    assert not is_id(value)


@pytest.mark.parametrize("text", ["\\u0000", "a\\u0000", "\\u0000b", "a\\u0000\\n"])
def test_nul_in_text_is_refused_at_its_field(text: str) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        _decoder.decode(b'{"id": 1, "name": "%s"}' % text.encode())
    assert str(info.value).endswith("- at `$.name`")


@pytest.mark.parametrize("text", ["", "plain", "line\\nbreak", "\\u00e9t\\u00e9", "\\ud83d\\ude00", "\\u0001\\u001f"])
def test_any_other_text_is_taken(text: str) -> None:
    assert _decoder.decode(b'{"id": 1, "name": "%s"}' % text.encode()).name == msgspec.json.decode(
        b'"%s"' % text.encode()
    )


def test_a_lone_surrogate_never_decodes_to_text() -> None:
    """PostgreSQL could not take one either; msgspec refuses it while reading JSON (a 400, not a 422)."""
    with pytest.raises(msgspec.DecodeError):
        _decoder.decode(b'{"id": 1, "name": "\\ud800"}')
    with pytest.raises(msgspec.DecodeError):
        msgspec.msgpack.decode(b"\xa3\xed\xa0\x80", type=Text)  # the surrogate's UTF-8-style bytes
