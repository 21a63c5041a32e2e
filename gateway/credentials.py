"""Signed, expiring user tokens (JWT, HS256) and hashed per-cluster ingest keys.

Outside web/ so that the CLI, the demo and its seed mint tokens and keys without importing the web app
(gateway.web.auth re-exports these names for the app and older importers).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

import jwt

from .core.types import is_id


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


def read_token(secret: str, token: str, max_age: float | None = None) -> Claims:
    """The session of a valid token; raises InvalidToken when forged, expired, malformed, or (with `max_age`)
    when its session started longer ago than that."""
    try:
        claims = jwt.decode(token, secret, algorithms=["HS256"], options={"require": ["sub", "exp", "iat"]})
        # Tokens from before sessions had ids: their session started when they were issued.
        found = Claims(
            int(claims["sub"]),
            str(claims.get("jti", "")),
            float(claims.get("auth_time", claims["iat"])),
            float(claims["exp"]),
        )
    except jwt.ExpiredSignatureError:
        raise InvalidToken("token expired") from None
    except (jwt.InvalidTokenError, ValueError, TypeError):
        raise InvalidToken("invalid token") from None
    if max_age is not None and time.time() - found.started > max_age:
        raise InvalidToken("session too old: sign in again")
    return found


def new_cluster_key(cluster_id: int) -> tuple[str, str]:
    """A fresh ingest key for a cluster and the hash to store; the key is shown once."""
    key = f"c{cluster_id}.{secrets.token_urlsafe(24)}"
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
