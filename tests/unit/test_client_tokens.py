"""The client's tokens: a provider asked only when needed, never twice for a refused fresh token, and
`token_from_command` failures told in one line without the command."""

from __future__ import annotations

import pytest

from gateway.client.errors import Unauthorized
from gateway.client.tokens import Tokens, token_from_command


async def test_a_token_command_prints_the_token() -> None:
    assert await token_from_command("echo progress >&2; printf 'abc.def\\n'")() == "abc.def"


async def test_a_failing_token_command_says_its_exit_status_and_last_words_not_the_command() -> None:
    with pytest.raises(Unauthorized) as raised:
        await token_from_command("echo first >&2; echo 'no such user' >&2; exit 7 # s3cret")()
    assert str(raised.value) == "cannot get a token: the token command exited with 7: no such user"


async def test_a_token_command_that_prints_nothing_is_refused() -> None:
    with pytest.raises(Unauthorized, match="printed no token"):
        await token_from_command("true")()


async def test_a_token_command_that_hangs_is_stopped() -> None:
    with pytest.raises(Unauthorized, match="did not finish within 0.2 s"):
        await token_from_command("sleep 30", timeout=0.2)()


def test_a_client_needs_a_token_or_a_provider() -> None:
    with pytest.raises(ValueError):
        Tokens(None, None)


async def test_without_a_provider_renewing_raises_the_servers_reason() -> None:
    tokens = Tokens("t", None)
    with pytest.raises(Unauthorized) as raised:
        await tokens.renew("token expired")
    assert raised.value.reason == "token expired"


async def test_a_provider_is_asked_when_needed_and_not_again_for_its_own_refused_token() -> None:
    asked: list[str] = []

    async def provider() -> str:
        asked.append(f"token{len(asked)}")
        return asked[-1]

    tokens = Tokens(None, provider)
    assert await tokens.get() == "token0" and await tokens.get() == "token0"
    with pytest.raises(Unauthorized, match="fresh token"):
        await tokens.renew("invalid token")  # token0 was refused before any handshake accepted it
    tokens.accepted()
    await tokens.renew("token expired")
    assert tokens.current == "token1" and asked == ["token0", "token1"]
