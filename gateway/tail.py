"""`gateway tail`: one channel's messages as JSON lines on stdout, for scripts and pipes.

Failures are one line on stderr and an exit status a script can test: 3 the token was refused or expired
(and no --token-command could renew it), 4 the channel was refused, 5 no connection after --attempts.
A closed output (`gateway tail ... | head -3`) ends it quietly with 0, even while the feed is quiet.
"""

from __future__ import annotations

import asyncio
import os
import select
import stat
import sys
from dataclasses import dataclass

import msgspec

from . import exits
from .client import ChannelRefused, ConnectionFailed, GatewayClient, GatewayError, Unauthorized, token_from_command
from .core.protocol import Format

EXIT_UNAUTHORIZED = exits.UNAUTHORIZED
EXIT_REFUSED = exits.REFUSED
EXIT_CANNOT_CONNECT = exits.UNREACHABLE
OUTPUT_CHECK_EVERY = 1.0  # seconds between looks at whether the pipe's reader is still there
RENEW_HINT = "get a new one (`gateway token --user ID`), or pass --token-command to renew it by itself"

_encoder = msgspec.json.Encoder()


@dataclass
class Tail:
    url: str
    channel: str
    token: str | None
    token_command: str | None
    fmt: Format = "json"
    attempts: int | None = None  # None: retry forever
    status: int = 0  # the exit status, once run() returned

    async def run(self) -> None:
        """Follow until interrupted, the output closes or the client fails; sets `status`."""
        try:
            await self._race()
        except BrokenPipeError:
            _silence_stdout()
        except GatewayError as exc:
            self.status, message = self._failure(exc)
            print(f"gateway: {message}", file=sys.stderr)

    async def _race(self) -> None:
        """Print until the client fails or the pipe's reader is gone, whichever comes first."""
        follow = asyncio.create_task(self._follow(), name="tail-follow")
        gone = asyncio.create_task(_reader_gone(sys.stdout.fileno()), name="tail-output")
        try:
            done, _ = await asyncio.wait({follow, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (follow, gone):
                task.cancel()
            await asyncio.gather(follow, gone, return_exceptions=True)
        if follow in done:
            follow.result()  # its error, if any
        else:
            raise BrokenPipeError

    async def _follow(self) -> None:
        provider = token_from_command(self.token_command) if self.token_command else None
        client = GatewayClient(self.url, self.token, fmt=self.fmt, token_provider=provider, max_attempts=self.attempts)
        async with client:
            await client.subscribe(self.channel)
            async for message in client:
                sys.stdout.write(_encoder.encode(message).decode() + "\n")
                sys.stdout.flush()

    def _failure(self, exc: GatewayError) -> tuple[int, str]:
        if isinstance(exc, Unauthorized):
            return EXIT_UNAUTHORIZED, str(exc) if self.token_command else f"{exc.reason}: {RENEW_HINT}"
        if isinstance(exc, ChannelRefused):
            return EXIT_REFUSED, f"{exc.code}: {exc.channel} ({exc.message})"
        if isinstance(exc, ConnectionFailed):
            return EXIT_CANNOT_CONNECT, str(exc)
        return 1, str(exc)


async def _reader_gone(fd: int) -> None:
    """Return once `fd` is a pipe whose reader has exited. Writing would say so too, but only at the next
    message, and a quiet channel may have none for hours (GNU `tail -f` watches its output the same way)."""
    if not stat.S_ISFIFO(os.fstat(fd).st_mode) or not hasattr(select, "poll"):
        await asyncio.Event().wait()  # a terminal or a file: nothing to watch
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR comes whatever the mask: the write end of a pipe with no reader
    while not poller.poll(0):
        await asyncio.sleep(OUTPUT_CHECK_EVERY)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail on the closed pipe again
    (the recipe of the Python docs' note on SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
