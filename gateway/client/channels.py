"""What a GatewayClient keeps per channel, without I/O: where to resume (gateway.core.follower's checks), the
channels the server refused for good, and which to ask for again when (after a drop, a gap, a resync, or an
`unavailable` answer, with backoff). Times are the caller's clock (the event loop's)."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

from ..core.follower import REFUSALS, TRY_AGAIN, Position, Verdict, channel_named
from ..core.protocol import Error, Pong, Preferences, Resync, ServerMessages, Snapshot
from .errors import ChannelRefused, Forbidden

log = logging.getLogger("gateway.client")

FIRST_DELAY = 0.25  # seconds before the first retry; doubles up to the client's max_backoff


def jitter(delay: float) -> float:
    """Between half and one and a half times `delay`: many clients told to wait do not come back at once."""
    return delay * (0.5 + random.random())


@dataclass
class Followed:
    position: Position = field(default_factory=Position)  # the resume protocol's side (gateway.core.follower)
    retry_delay: float = FIRST_DELAY  # before asking again after `unavailable`

    @property
    def cursor(self) -> str | None:  # where to resume after a drop (None while a snapshot's pages still come)
        return self.position.resume_cursor


class ClientChannels:
    def __init__(self, max_backoff: float) -> None:
        self.max_backoff = max_backoff
        self.followed: dict[str, Followed] = {}
        self.refused: dict[str, ChannelRefused] = {}  # channels dropped for good, and why
        self.due: dict[str, float] = {}  # channels to subscribe to again, at this time

    def follow(self, name: str) -> Followed:
        """A channel asked for (again, even one refused before)."""
        self.refused.pop(name, None)
        return self.followed.setdefault(name, Followed())

    def unfollow(self, name: str) -> None:
        self.followed.pop(name, None)
        self.due.pop(name, None)

    def ask_again(self, name: str, at: float = 0.0) -> None:
        self.due[name] = at

    def ask_all_again(self) -> None:
        """After a reconnect: every channel, each from its cursor."""
        self.due = dict.fromkeys(self.followed, 0.0)

    def due_now(self, now: float) -> list[tuple[str, str | None]]:
        """The channels to subscribe to now, with the cursor to resume from; `asked()` each once sent."""
        return [(n, self.followed[n].cursor) for n, at in self.due.items() if at <= now and n in self.followed]

    def asked(self, name: str) -> None:
        self.due.pop(name, None)

    def until_due(self, now: float) -> float | None:
        return max(0.0, min(self.due.values()) - now) if self.due else None

    def track(self, m: ServerMessages, now: float) -> bool:
        """Keep each channel's cursor; notice what was lost. False: not for the caller."""
        if isinstance(m, Error):
            return self._on_error(m, now)
        if isinstance(m, Pong | Preferences):  # on no channel: the caller's
            return True
        state = self.followed.get(m.channel)
        if state is None:
            return True
        position, held = state.position, state.position.seq
        if isinstance(m, Snapshot):
            self.due.pop(m.channel, None)
            state.retry_delay = FIRST_DELAY
            verdict = position.snapshot(m.seq, m.cursor, m.page, m.final)
        elif isinstance(m, Resync):
            verdict = position.resync()
        else:
            verdict = position.message(m.seq, m.cursor)
        if verdict is Verdict.GAP:
            log.warning("%s: lost messages after seq %s, loading it again", m.channel, held)
        if verdict is Verdict.GAP or verdict is Verdict.RESYNC:
            state.position.reload()  # forget where the channel was, and ask for a fresh snapshot
            self.due[m.channel] = 0.0
        return verdict is not Verdict.GAP and verdict is not Verdict.DUPLICATE  # a resync is yielded

    def _on_error(self, m: Error, now: float) -> bool:
        """Refusals drop their channel and are raised; `unavailable` schedules another try."""
        name = channel_named(m.channel, self.followed)
        if name is None:
            return True
        if m.code in REFUSALS:
            self.unfollow(name)
            refused = (Forbidden if m.code == "forbidden" else ChannelRefused)(name, m.code, m.message)
            self.refused[name] = refused
            raise refused
        if m.code in TRY_AGAIN:
            state = self.followed[name]
            self.due[name] = now + jitter(state.retry_delay)
            state.retry_delay = min(state.retry_delay * 2, self.max_backoff)
        return True
