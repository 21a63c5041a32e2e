"""The gateway's app under uvicorn's standard websocket protocol (`websockets-sansio`, with uvicorn's own
permessage-deflate): the ASGI fallback of gateway.web.ws, as any other ASGI server would run it.

    python -m tests.integration.asgi_node PORT
"""

from __future__ import annotations

import sys

import uvicorn

from gateway.config import Settings
from gateway.web.app import create_app
from gateway.web.logs import configure
from gateway.web.serving import uvicorn_config


def main() -> None:
    settings = Settings()
    configure(settings.log_level, settings.log_format)
    config = uvicorn_config(create_app(settings), settings, "127.0.0.1", int(sys.argv[1]))
    config.ws = "websockets-sansio"  # uvicorn's own: no hand-over to the node's link, compression per connection
    config.ws_per_message_deflate = True
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
