"""How the Python peers run: uvicorn as `uvicorn[standard]` gives it, with no per-connection log lines (the
Node peers print none either)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import uvicorn


def serve(build_app: Callable[[str], Any], description: str) -> None:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.redis),
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        ws="auto",  # websockets-sansio in uvicorn 0.54 with `uvicorn[standard]`: what a Python team gets
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
    )
