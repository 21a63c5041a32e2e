"""Signed, expiring user tokens (JWT, HS256) and hashed per-cluster ingest keys.

Outside web/ so that the CLI, the demo and its seed mint tokens and keys without importing the web app
(gateway.web.people.auth re-exports these names for the app and older importers).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

import jwt

from .core.types import is_id

CLOCK_SKEW = 60.0  # seconds a token's `iat` and `auth_time` may lie ahead of this node's clock (another's)
_CANONICAL_ID = re.compile(r"[1-9][0-9]{0,18}")  # ASCII digits, no sign, underscore, space or leading zero
_MAX_INSTANT = 2**53


class InvalidToken(Exception):
    """The text is safe to show: it never contains the token."""


@dataclass(frozen=True)
class Claims:
    """A valid token's session."""

    user_id: int
    token_id: str  # names the session: renewals keep it, so revoking it ends the session ("" on older tokens)
    started: float  # when the user signed in (Unix time): renewals keep it, GATEWAY_SESSION_MAX_AGE counts from it
    expires: float


def issue_token(
    secret: str,
    user_id: int,
    ttl: float,
    now: float | None = None,
    token_id: str | None = None,
    started: float | None = None,
) -> str:
    """A new session's token, or with `token_id` and `started` a renewal of one."""
    now = time.time() if now is None else now
    claims = {
        "sub": str(user_id),
        "iat": int(now),
        "exp": int(now + ttl),
        "jti": token_id or secrets.token_urlsafe(12),
        "auth_time": int(now if started is None else started),
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def verify_token(secret: str, token: str) -> int:
    """The user id a token was issued to; raises InvalidToken when forged, expired or malformed."""
    return read_token(secret, token).user_id


def read_token(secret: str, token: str, max_age: float | None = None, now: float | None = None) -> Claims:
    """The session of a valid token; raises InvalidToken when forged, expired, malformed, issued in the future
    (past CLOCK_SKEW), or (with `max_age`) when its session started longer ago than that."""
    now = time.time() if now is None else now
    try:
        # PyJWT's own `iat` check allows no skew at all: read_token's allows CLOCK_SKEW, as for `auth_time`.
        claims = jwt.decode(
            token, secret, algorithms=["HS256"], options={"require": ["sub", "exp", "iat"], "verify_iat": False}
        )
    except jwt.ExpiredSignatureError:
        raise InvalidToken("token expired") from None
    except jwt.InvalidTokenError:
        raise InvalidToken("invalid token") from None
    user_id = user_of(claims["sub"])
    issued = instant(claims["iat"])
    # Tokens from before sessions had ids: their session started when they were issued.
    started = instant(claims.get("auth_time", claims["iat"]))
    expires = instant(claims["exp"])
    token_id = claims.get("jti", "")
    if user_id is None or issued is None or started is None or expires is None or not isinstance(token_id, str):
        raise InvalidToken("invalid token")
    if max(issued, started) > now + CLOCK_SKEW:
        # Only the signing secret mints these, yet a session started in the future would never grow too old,
        # and `gateway revoke --user` (sessions started at or before it) would miss it.
        raise InvalidToken("token issued in the future: check the clocks")
    if max_age is not None and now - started > max_age:
        raise InvalidToken("session too old: sign in again")
    return Claims(user_id, token_id, started, expires)


class VerifiedTokens:
    """Tokens whose signature and claims were checked once, with their sessions: a token is verified again only
    once it has left this bounded cache (the oldest leave first), so a reconnect storm pays HMAC and JSON once
    per token, not once per connect. What can change while a token is valid is still checked on every read:
    its expiry and its session's age here, revocation by the caller. Only valid tokens are kept."""

    def __init__(self, secret: str, size: int = 16384) -> None:
        self.secret = secret
        self.size = size
        self._claims: dict[str, Claims] = {}

    def read(self, token: str, max_age: float | None = None, now: float | None = None) -> Claims:
        """As read_token(secret, token, max_age, now)."""
        now = time.time() if now is None else now
        found = self._claims.get(token)
        if found is None:
            found = read_token(self.secret, token, None, now)
            if len(self._claims) >= self.size:
                del self._claims[next(iter(self._claims))]
            self._claims[token] = found
        if now >= found.expires:  # what PyJWT's `exp` check says: expired at its second
            del self._claims[token]
            raise InvalidToken("token expired")
        if max_age is not None and now - found.started > max_age:
            raise InvalidToken("session too old: sign in again")
        return found

    def __len__(self) -> int:
        return len(self._claims)


def user_of(sub: object) -> int | None:
    """A token's `sub` as the user id it names: the canonical decimal spelling of an id PostgreSQL can hold,
    or None. int() would read "1_0" as 10 and " 7" as 7, and 2**70 would fail only in the database."""
    if not isinstance(sub, str) or _CANONICAL_ID.fullmatch(sub) is None:
        return None
    user_id = int(sub)
    return user_id if is_id(user_id) else None


def instant(value: object) -> float | None:
    """A Unix time claim as a float, or None when it is no number, not finite, or beyond any date a float holds
    to the second (NaN and Infinity are JSON that Python's parser takes; a huge int would overflow a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -_MAX_INSTANT <= value <= _MAX_INSTANT:
        return None
    return float(value)


def new_cluster_key(cluster_id: int) -> tuple[str, str]:
    """A fresh ingest key for a cluster and the hash to store; the key is shown once."""
    key = f"c{cluster_id}.{secrets.token_urlsafe(24)}"
    return key, hash_key(key)


def demo_cluster_key(secret: str, cluster_id: int) -> tuple[str, str]:
    """The demo's key for a cluster and its hash: derived from the demo's secret, so a demo restarted on the same
    data folder hands its clusters, and any tool given one, the key they already hold."""
    mac = hmac.new(secret.encode(), f"demo cluster key {cluster_id}".encode(), hashlib.sha256).digest()
    key = f"c{cluster_id}.{base64.urlsafe_b64encode(mac[:24]).decode()}"
    return key, hash_key(key)


def hash_key(key: str) -> str:
    # Keys are 192 random bits, so a fast hash is enough: nothing to brute-force.
    return hashlib.sha256(key.encode()).hexdigest()


def cluster_of_key(key: str) -> int | None:
    head, sep, _ = key.partition(".")
    digits = head[1:]
    # ASCII digits only (str.isdigit takes '²', which int() refuses), and an id PostgreSQL can hold.
    if not sep or not head.startswith("c") or not (digits.isascii() and digits.isdigit()) or len(head) > 20:
        return None
    cluster_id = int(digits)
    return cluster_id if is_id(cluster_id) else None


def key_matches(key: str, stored_hash: str | None) -> bool:
    return stored_hash is not None and hmac.compare_digest(hash_key(key), stored_hash)
