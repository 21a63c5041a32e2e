"""What the kernel knows of a connection's sending side, for the keepalive's judgement of a silent peer.

A peer that has not answered a ping may be gone, or only slow: our ping waits behind what it has not read.
The transport's own buffer shows the peer reading only once the kernel's send queue has freed about half of
itself, which for a slow reader can take longer than a keepalive interval. The kernel knows sooner: bytes it
could not send yet (the peer's receive window is full) and bytes the peer has acknowledged. While bytes wait
for the window, every byte acknowledged is one the peer's application read to make room.

Linux only (SIOCOUTQNSD, TCP_INFO's tcpi_bytes_acked); elsewhere both read 0 and the keepalive judges by the
transport's buffer alone.
"""

from __future__ import annotations

import array
import fcntl
import socket
import struct
import sys
from typing import Any

__all__ = ["acknowledged", "unsent"]

_SIOCOUTQNSD = 0x894B  # bytes in the send queue not sent yet
_BYTES_ACKED = struct.Struct("=Q")  # struct tcp_info's tcpi_bytes_acked (Linux 4.1+), at offset 120
_BYTES_ACKED_AT = 120
_LINUX = sys.platform == "linux"


def unsent(sock: Any) -> int:
    """Bytes the kernel holds for the socket and could not send yet: more than 0, the peer's window is full."""
    if not _LINUX or sock is None:
        return 0
    count = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), _SIOCOUTQNSD, count)
    except OSError:
        return 0
    return count[0]


def acknowledged(sock: Any) -> int:
    """Bytes the peer has acknowledged over the connection's life (0 where the kernel does not say)."""
    if not _LINUX or sock is None:
        return 0
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _BYTES_ACKED_AT + _BYTES_ACKED.size)
    except OSError:
        return 0
    if len(info) < _BYTES_ACKED_AT + _BYTES_ACKED.size:
        return 0
    return int(_BYTES_ACKED.unpack_from(info, _BYTES_ACKED_AT)[0])
