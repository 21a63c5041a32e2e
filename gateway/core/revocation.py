"""Revoked sessions: what `gateway revoke` (or a sign-out) says, and the set a node checks every token against.

A token's id names its session (renewals keep it), so revoking an id ends the session, renewed or not. Revoking
a user ends every session of theirs that started at or before the revocation. Nothing is remembered longer
than a session may last (GATEWAY_SESSION_MAX_AGE): by then every session it could end has ended by itself.
"""

from __future__ import annotations

import msgspec


class Revocation(msgspec.Struct, frozen=True, tag_field="type", tag="revoke"):
    """Also an announcement every node hears (gateway.bus.announcements, on a channel of its own)."""

    at: float  # when it was recorded (Unix time, the database's clock)
    user_id: int | None = None  # every session of this user started at or before `at`
    token_id: str | None = None  # or this one session


class Revocations:
    """The revoked sessions a node knows of: two dict lookups per check."""

    __slots__ = ("users", "tokens")

    def __init__(self) -> None:
        self.users: dict[int, float] = {}  # user -> sessions started at or before this are revoked
        self.tokens: dict[str, float] = {}  # token id -> when revoked

    def revoked(self, user_id: int, token_id: str, started: float) -> bool:
        before = self.users.get(user_id)
        return (before is not None and started <= before) or (bool(token_id) and token_id in self.tokens)

    def is_new(self, revocation: Revocation) -> bool:
        if revocation.user_id is not None:
            return self.users.get(revocation.user_id, float("-inf")) < revocation.at
        return revocation.token_id is not None and revocation.token_id not in self.tokens

    def add(self, revocation: Revocation) -> bool:
        """Remember it; True when it revokes more than was known (live sessions it names must end)."""
        new = self.is_new(revocation)
        if new and revocation.user_id is not None:
            self.users[revocation.user_id] = revocation.at
        elif new and revocation.token_id is not None:
            self.tokens[revocation.token_id] = revocation.at
        return new

    def merge(self, found: list[Revocation], forget_before: float) -> list[Revocation]:
        """Add what was stored (a broadcast may have missed this node), forget what is too old to matter;
        returns what was not known."""
        new = [r for r in found if self.add(r)]
        self.users = {u: at for u, at in self.users.items() if at >= forget_before}
        self.tokens = {t: at for t, at in self.tokens.items() if at >= forget_before}
        return new
