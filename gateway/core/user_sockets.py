"""The per-user socket limit across processes, without I/O and without a clock (the caller passes the time).

Every process that holds websockets (a node, or each worker of `serve --workers N`) records how many a user
holds there, with the time that record lapses unless the process renews it: a process that dies stops
renewing, and its sockets stop counting. A new socket is allowed while the user's live records, with this
process's count (the new socket included) in place of its own record, stay within the limit.
"""

from __future__ import annotations

from collections.abc import Mapping

Record = tuple[int, float]  # (sockets held, when the record lapses)


def within_limit(records: Mapping[str, Record], process: str, count: int, limit: int, now: float) -> bool:
    """Whether the user may hold `count` sockets in `process`, given every process's `records`."""
    others = sum(held for name, (held, lapses) in records.items() if name != process and lapses > now)
    return others + count <= limit
