"""The failures a node rides out (PostgreSQL or Redis away or restarting): a request fails, the node goes on."""

from __future__ import annotations

from ..bus.errors import BusError
from ..store.errors import STORE_UNAVAILABLE

TRANSIENT: tuple[type[Exception], ...] = (*STORE_UNAVAILABLE, BusError)
RETRY_AFTER = 0.2  # seconds before a failed read is tried once more, on a fresh connection
