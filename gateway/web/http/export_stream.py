"""A streamed export that cannot hold the node: `done` runs however the stream ends (the export's slots given back),
and a StreamCut its parts raise ends it unfinished (logged): the connection then closes without the chunked
answer's end, so the reader can tell a cut export from a whole one. The stream holds no pooled connection while it
waits on its reader: each part is read, rendered and let go before it is sent. A reader that takes nothing is cut
by the HTTP protocol (GATEWAY_SEND_STALL_SECONDS, gateway.web.server.http11), which the stream sees as a disconnect."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Callable, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

log = logging.getLogger("gateway")


class StreamCut(Exception):
    """The stream ends here, unfinished; the message says why (logged)."""


class ExportResponse(StreamingResponse):
    def __init__(
        self, content: AsyncIterable[str], done: Callable[[], None], headers: Mapping[str, str], media_type: str
    ) -> None:
        super().__init__(content, headers=headers, media_type=media_type)
        self.done = done

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        except StreamCut as cut:
            log.warning("export cut: %s", cut)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.done()
