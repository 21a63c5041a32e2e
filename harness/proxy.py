"""A TCP proxy a test can cut, to isolate a process from PostgreSQL or Redis without killing either."""

from __future__ import annotations

import asyncio
import contextlib


class Proxy:
    def __init__(self, target_host: str, target_port: int = 0) -> None:
        """Forward to host:port, or to a Unix socket when `target_host` is a path."""
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.blocked = False
        self.downstream = 0  # bytes the target sent its clients through the proxy
        self.flowing = asyncio.Event()  # cleared: a stall, nothing forwarded either way and nothing closed
        self.flowing.set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blocked:
            writer.close()
            return
        try:
            if self.target[0].startswith("/"):
                up_reader, up_writer = await asyncio.open_unix_connection(self.target[0])
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer, False), self._pipe(up_reader, writer, True))

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, down: bool) -> None:
        """One direction of one connection, until either end closes (harness/faults.py shapes it)."""
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await src.read(65536):
                await self.flowing.wait()
                if down:
                    self.downstream += len(data)
                dst.write(data)
                await dst.drain()
            await self.flowing.wait()  # stalled, a close does not get through either
        dst.close()

    def cut(self) -> None:
        """Drop every connection through the proxy and refuse new ones."""
        self.blocked = True
        for w in list(self._writers):
            transport = w.transport
            if not transport.is_closing():  # one already closed has no loop left to tell
                transport.abort()
        self._writers.clear()

    def restore(self) -> None:
        self.blocked = False

    def stall(self) -> None:
        """A half-open link: every connection stays open, but nothing gets through either way (no FIN, no RST),
        as when a network drops packets; the peers' kernels still see a live socket."""
        self.flowing.clear()

    def flow(self) -> None:
        self.flowing.set()

    async def close(self) -> None:
        self.cut()
        self.flowing.set()  # a stall's held closes go through: no task is left waiting on it
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
