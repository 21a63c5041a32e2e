"""Heavy reads (searches, deep pages, exports) bounded per user and per node: each may cost PostgreSQL seconds
(up to GATEWAY_STATEMENT_TIMEOUT a statement) or stream for minutes, so one person's burst must not take the pool
every other team needs (429 past a bound, the read not started)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..core.ratelimit import Concurrency
from .guards import Refused

DEEP_OFFSET = 10_000  # a page past this many rows costs PostgreSQL a walk over all of them: a heavy read
RETRY_AFTER = 5.0  # seconds: about what a slow search takes, by then a slot has freed


class HeavyReads:
    def __init__(self, per_user: int, exports_per_user: int, exports_per_node: int) -> None:
        self.users = Concurrency(per_user)
        self.user_exports = Concurrency(exports_per_user)
        self.node_exports = Concurrency(exports_per_node)

    @contextlib.contextmanager
    def slot(self, user_id: int) -> Iterator[None]:
        """One of the user's heavy reads, for the read inside."""
        release = self.take(user_id)
        try:
            yield
        finally:
            release()

    def take(self, user_id: int, export: bool = False) -> Callable[[], None]:
        """One of the user's heavy reads (and with `export`, one of the user's and the node's exports), or
        Refused 429 naming the bound; the function returned gives them back (an export's when its stream ends)."""
        if not self.users.acquire(user_id):
            raise _busy(f"at most {self.users.limit} of your searches, deep pages and exports at once")
        if export and not self.user_exports.acquire(user_id):
            self.users.release(user_id)
            raise _busy(f"at most {self.user_exports.limit} of your exports at once")
        if export and not self.node_exports.acquire(None):
            self.users.release(user_id)
            self.user_exports.release(user_id)
            raise _busy(f"this node streams {self.node_exports.limit} exports already")

        def release() -> None:
            self.users.release(user_id)
            if export:
                self.user_exports.release(user_id)
                self.node_exports.release(None)

        return release


def _busy(what: str) -> Refused:
    return Refused(429, "too_many_reads", f"{what}: wait for one to finish", RETRY_AFTER)
