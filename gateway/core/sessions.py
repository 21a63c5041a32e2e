"""Which sessions a node has seen lately, and which of them are due to be written: each at most once per
`every` seconds, however many requests and sockets it makes. No I/O and no clock: the caller says when.

A node hands what `take` gives it to PostgreSQL in one statement now and then (gateway.hub.sessions), so the
account page's "last seen" costs a handful of writes a minute per active session, not one per request.
"""

from __future__ import annotations

from typing import NamedTuple

SEEN_EVERY = 60.0  # seconds: how stale a session's "last seen" may be while it is used
MAX_PENDING = 10_000  # sessions waiting for the next write; past it new ones wait until they are seen again


class Seen(NamedTuple):
    """A request or a handshake of a session (a valid, unrevoked token with an id)."""

    token_id: str
    user_id: int
    started: float  # when the person signed in (Unix time)
    expires: float  # when this token expires (Unix time)
    device: str  # in a few words (gateway.core.device)


class Due(NamedTuple):
    """What to write: sessions to record (created, or their device and expiry brought up to date) and the token
    ids of live sockets whose session only needs its "last seen" moved."""

    seen: list[Seen]
    live: list[str]


class SeenSessions:
    __slots__ = ("every", "max_pending", "pending", "live", "written")

    def __init__(self, every: float = SEEN_EVERY, max_pending: int = MAX_PENDING) -> None:
        self.every = every
        self.max_pending = max_pending
        self.pending: dict[str, Seen] = {}
        self.live: set[str] = set()
        self.written: dict[str, float] = {}  # token id -> when it was last handed out to be written

    def wants(self, token_id: str, now: float) -> bool:
        """Would a request of this session now be written? (No: skip working out what to write.)"""
        return bool(token_id) and not self._fresh(token_id, now)

    def seen(self, seen: Seen, now: float) -> None:
        """A request or a handshake made with this session."""
        token_id = seen.token_id
        if not self.wants(token_id, now):
            return
        if token_id not in self.pending and len(self.pending) >= self.max_pending:
            return
        self.pending[token_id] = seen  # the latest wins: its expiry is the furthest
        self.live.discard(token_id)

    def still_live(self, token_ids: set[str], now: float) -> None:
        """The sessions of the node's open sockets: seen now, though a socket makes no requests."""
        for token_id in token_ids:
            if token_id and token_id not in self.pending and not self._fresh(token_id, now):
                if len(self.live) >= self.max_pending:
                    return
                self.live.add(token_id)

    def take(self, now: float) -> Due:
        """What is due to be written, marked written now; forgets marks too old to hold anything back."""
        due = Due(list(self.pending.values()), sorted(self.live))
        self.pending, self.live = {}, set()
        written = {t: at for t, at in self.written.items() if now - at < self.every}
        for seen in due.seen:
            written[seen.token_id] = now
        for token_id in due.live:
            written[token_id] = now
        self.written = written
        return due

    def failed(self, due: Due) -> None:
        """Writing `due` failed: its sessions are written when they are next seen."""
        for seen in due.seen:
            self.written.pop(seen.token_id, None)
        for token_id in due.live:
            self.written.pop(token_id, None)

    def _fresh(self, token_id: str, now: float) -> bool:
        at = self.written.get(token_id)
        return at is not None and now - at < self.every
