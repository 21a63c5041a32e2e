"""A streamed answer whose reader cannot hold the node: a part the reader does not take within `stall` seconds
ends the stream, as does a StreamCut its parts raise. The connection then closes without the chunked answer's end,
so the reader can tell a cut export from a whole one. `done` runs however the stream ends (the export's slots given
back). The stream holds no pooled connection while it waits: each part is read, rendered and let go before it is
sent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Callable, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

log = logging.getLogger("gateway")


class StreamCut(Exception):
    """The stream ends here, unfinished; the message says why (logged)."""


class ExportResponse(StreamingResponse):
    def __init__(
        self,
        content: AsyncIterable[str],
        stall: float,
        done: Callable[[], None],
        headers: Mapping[str, str],
        media_type: str,
    ) -> None:
        super().__init__(content, headers=headers, media_type=media_type)
        self.stall, self.done = stall, done

    async def stream_response(self, send: Send) -> None:
        async def within_stall(message: Message) -> None:
            try:
                async with asyncio.timeout(self.stall):
                    await send(message)  # waits while the reader's window is full
            except TimeoutError:
                raise StreamCut(
                    f"its reader took nothing for {self.stall:g} s (GATEWAY_EXPORT_STALL_SECONDS)"
                ) from None

        try:
            await super().stream_response(within_stall)
        except StreamCut as cut:
            log.warning("export cut: %s", cut)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.done()
