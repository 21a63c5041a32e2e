"""The gateway's app under uvicorn (its httptools protocol and its `websockets-sansio` websocket protocol, with
its own permessage-deflate): the ASGI fallback of gateway.web.websocket.ws, as any other ASGI server would run it.

    python -m tests.integration.asgi_node PORT
"""

from __future__ import annotations

import sys

import uvicorn

from gateway.config import Settings
from gateway.web.app import create_app
from gateway.web.node.logs import configure


def main() -> None:
    settings = Settings()
    configure(settings.log_level, settings.log_format)
    config = uvicorn.Config(
        create_app(settings),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        loop="uvloop",
        ws="websockets-sansio",  # uvicorn's own: no hand-over to the node's link, compression per connection
        ws_max_size=settings.max_message_bytes,
        ws_per_message_deflate=True,
        lifespan="on",
        log_config=None,
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
