"""The token `gateway.client` connects with: the one it was given, then fresh ones from a provider.

A provider is asked only when a token is needed: at the first connection when none was given, after the
server refuses the current one at the handshake (401), and after it closes a session whose token expired
(4001). A token it has just given that the server refuses at once is not asked for again: that raises
`Unauthorized`, so a provider that only returns bad tokens cannot keep the client busy forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
from collections.abc import Awaitable, Callable

from .errors import Unauthorized

TokenProvider = Callable[[], str | Awaitable[str]]  # a plain or an async function
COMMAND_TIMEOUT = 30.0


class Tokens:
    def __init__(self, token: str | None, provider: TokenProvider | None) -> None:
        if not token and provider is None:
            raise ValueError("GatewayClient needs a token or a token_provider")
        self.current = token or None
        self.provider = provider
        self.fresh = False  # `current` came from the provider and no handshake has accepted it yet

    async def get(self) -> str:
        if self.current is None:
            await self.renew("no token")
        assert self.current is not None
        return self.current

    async def renew(self, reason: str) -> None:
        """A new token, after the server refused the current one for `reason`; raises Unauthorized when
        there is no provider, or when the provider's own new token was just refused."""
        if self.provider is None:
            raise Unauthorized(reason, "no token_provider to renew it")
        if self.fresh:
            raise Unauthorized(reason, "a fresh token from the token provider was refused too")
        token = self.provider()
        if inspect.isawaitable(token):
            token = await token
        if not isinstance(token, str) or not token.strip():
            raise Unauthorized("no token", "the token provider returned none")
        self.current, self.fresh = token.strip(), True

    def accepted(self) -> None:
        self.fresh = False


def token_from_command(command: str, timeout: float = COMMAND_TIMEOUT) -> Callable[[], Awaitable[str]]:
    """A provider that runs a shell command and reads the token from its standard output (its standard
    error is shown only when it fails), e.g. `token_from_command("gateway token --user 1")`."""

    async def run() -> str:
        proc = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: stopping it stops what the shell started too
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            raise Unauthorized("cannot get a token", f"the token command did not finish within {timeout:g} s") from None
        finally:
            if proc.returncode is None:  # timed out, or the client was cancelled meanwhile
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        # The command's words, not the command itself: it may hold a secret.
        if proc.returncode != 0:
            said = err.decode(errors="replace").strip().splitlines()
            raise Unauthorized(
                "cannot get a token",
                f"the token command exited with {proc.returncode}" + (f": {said[-1]}" if said else ""),
            )
        token = out.decode(errors="replace").strip()
        if not token or len(token.split()) != 1:
            raise Unauthorized("cannot get a token", "the token command printed no token (one word on standard output)")
        return token

    return run
