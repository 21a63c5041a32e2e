"""Heavy reads (searches, deep pages, exports) bounded per user and per node: each may cost PostgreSQL seconds
(up to GATEWAY_STATEMENT_TIMEOUT a statement) or stream for minutes, so one person's burst must not take the pool
every other team needs (429 past a bound, the read not started)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ...core.ratelimit import Concurrency
from .refusals import Refused

DEEP_OFFSET = 10_000  # a page past this many rows costs PostgreSQL a walk over all of them: a heavy read
RETRY_AFTER = 5.0  # seconds: about what a slow search takes, by then a slot has freed


class HeavyReads:
    """Per user: heavy reads of every kind, and exports among them. Per node: searches and deep pages (each holds
    a pooled connection while it runs: fewer than the pool has, so other calls find one), and exports (each holds
    one only while it reads a page, but renders for minutes)."""

    def __init__(self, per_user: int, per_node: int, exports_per_user: int, exports_per_node: int) -> None:
        self.users = Concurrency(per_user)
        self.node = Concurrency(per_node)
        self.user_exports = Concurrency(exports_per_user)
        self.node_exports = Concurrency(exports_per_node)

    @contextlib.contextmanager
    def slot(self, user_id: int) -> Iterator[None]:
        """One of the user's and the node's searches or deep pages, for the read inside."""
        release = self.take(user_id)
        try:
            yield
        finally:
            release()

    def take(self, user_id: int, export: bool = False) -> Callable[[], None]:
        """One of the user's heavy reads and one of the node's searches and deep pages (with `export`: one of the
        user's and the node's exports), or Refused 429 naming the bound; the function returned gives them back
        (an export's when its stream ends)."""
        taken: list[tuple[Concurrency, object]] = []

        def release() -> None:
            for limit, key in taken:
                limit.release(key)

        bounds: list[tuple[Concurrency, object, str]] = [
            (self.users, user_id, f"at most {self.users.limit} of your searches, deep pages and exports at once")
        ]
        if export:
            bounds.append((self.user_exports, user_id, f"at most {self.user_exports.limit} of your exports at once"))
            bounds.append((self.node_exports, None, f"this node streams {self.node_exports.limit} exports already"))
        else:
            bounds.append((self.node, None, f"this node runs {self.node.limit} searches and deep pages already"))
        for limit, key, what in bounds:
            if not limit.acquire(key):
                release()
                raise _busy(what)
            taken.append((limit, key))
        return release


def _busy(what: str) -> Refused:
    return Refused(429, "too_many_reads", f"{what}: wait for one to finish", RETRY_AFTER)
