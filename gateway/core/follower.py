"""The client side of the resume protocol, without I/O: where each followed channel stands, and what to do next.

Fed the server's channel messages (docs/protocol.md, "A client's loop"), a `Follower` keeps per channel the
last position applied (`seq` and `cursor`), checks that each message's `seq` follows the one held, follows a
snapshot's pages (0, 1, ... up to `final`), and answers each message with a `Verdict`: take it, skip it (a
duplicate), or load the channel again (a gap, a lost page, a `resync`). It sends nothing and reads no clock:
the caller subscribes again, with `resume_cursor()` after a reconnect or without a cursor after a reload.

Used by `gateway.client`, the tests' follower (harness/follower.py) and the benchmark's gateway dialect.
The browser keeps its own copy (frontend/js/live.js, `follow`): both pass frontend/vectors/follower.json.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass

# What an `error` about a channel means for asking for it again (docs/protocol.md, "Close codes").
REFUSALS = frozenset({"forbidden", "bad_channel", "too_many_subscriptions"})  # the same answer every time
TRY_AGAIN = frozenset({"unavailable", "internal"})  # the same request may work after a backoff
ERROR_CHANNEL_CHARS = 80  # the server cuts the channel named in some errors to this length


class Verdict(enum.Enum):
    APPLY = "apply"  # the next message in order (or the first since a reload): apply it
    PAGE = "page"  # a snapshot page in order: page 0 replaces the channel's state
    DUPLICATE = "duplicate"  # at or below the seq held: already applied, the position stays
    GAP = "gap"  # a seq or a snapshot page was skipped: the position stays; reload() and subscribe again
    RESYNC = "resync"  # the server dropped the subscription: the channel was reset; subscribe again
    UNFOLLOWED = "unfollowed"  # a channel this follower does not follow


@dataclass(slots=True)
class Position:
    """Where one channel stands: the last message applied, and how far its snapshot came. Its methods take
    each message's position and say what the message means; a client keeps one per channel (or embeds it in
    what it keeps per channel) and a `Follower` keeps them for a whole connection."""

    seq: int | None = None
    cursor: str | None = None
    ready: bool = False  # a whole snapshot arrived since the last reload (its final page)
    next_page: int | None = None  # a snapshot is under way: the page expected next

    @property
    def resume_cursor(self) -> str | None:
        """The cursor to subscribe with after a reconnect: None before any message, or while a snapshot is
        under way (its first pages' cursor would skip the pages still to come)."""
        return None if self.next_page is not None else self.cursor

    def reload(self) -> None:
        """Forget where the channel stood (before subscribing to it again without a cursor)."""
        self.seq = self.cursor = self.next_page = None
        self.ready = False

    def snapshot(self, seq: int, cursor: str, page: int, final: bool) -> Verdict:
        """A snapshot page: page 0 starts a snapshot, the others must follow it in order."""
        if page != 0 and page != self.next_page:
            return Verdict.GAP
        self.accept_page(seq, cursor, page, final)
        return Verdict.PAGE

    def accept_page(self, seq: int, cursor: str, page: int, final: bool) -> None:
        """Take a snapshot page the checks refused, as the page expected next (a test that notes a lost page
        and goes on); the pages after it are expected from it."""
        self.seq, self.cursor = seq, cursor
        self.ready = final
        self.next_page = None if final else page + 1

    def message(self, seq: int, cursor: str | None) -> Verdict:
        """A channel message with a position (batch, summary, notice, glow, presence, clusters ...)."""
        held = self.seq
        if held is not None and seq != held + 1:
            return Verdict.DUPLICATE if seq <= held else Verdict.GAP
        self.seq, self.cursor = seq, cursor
        return Verdict.APPLY

    def accept(self, seq: int, cursor: str | None) -> None:
        """Take a position the checks refused (a test that notes a gap and goes on)."""
        self.seq, self.cursor = seq, cursor

    def resync(self) -> Verdict:
        """The server says the channel is no longer subscribed: reset it."""
        self.reload()
        return Verdict.RESYNC


class Follower:
    """A connection's channels, each a `Position`; a message about a channel not followed is UNFOLLOWED."""

    def __init__(self) -> None:
        self.channels: dict[str, Position] = {}

    def follow(self, channel: str) -> Position:
        """Start (or keep) following a channel; its position is kept across reconnects."""
        return self.channels.setdefault(channel, Position())

    def forget(self, channel: str) -> None:
        self.channels.pop(channel, None)

    def position(self, channel: str) -> Position | None:
        return self.channels.get(channel)

    def resume_cursor(self, channel: str) -> str | None:
        held = self.channels.get(channel)
        return None if held is None else held.resume_cursor

    def reload(self, channel: str) -> None:
        held = self.channels.get(channel)
        if held is not None:
            held.reload()

    def snapshot(self, channel: str, seq: int, cursor: str, page: int, final: bool) -> Verdict:
        held = self.channels.get(channel)
        return Verdict.UNFOLLOWED if held is None else held.snapshot(seq, cursor, page, final)

    def message(self, channel: str, seq: int, cursor: str | None) -> Verdict:
        held = self.channels.get(channel)
        return Verdict.UNFOLLOWED if held is None else held.message(seq, cursor)

    def accept(self, channel: str, seq: int, cursor: str | None) -> None:
        self.follow(channel).accept(seq, cursor)

    def resync(self, channel: str) -> Verdict:
        held = self.channels.get(channel)
        return Verdict.UNFOLLOWED if held is None else held.resync()


def channel_named(named: str | None, followed: Collection[str]) -> str | None:
    """The followed channel an `error` names (None: none of them), found too when the server cut its name."""
    if named is None or named in followed:
        return named
    if len(named) == ERROR_CHANNEL_CHARS:
        return next((c for c in followed if c[:ERROR_CHANNEL_CHARS] == named), None)
    return None
