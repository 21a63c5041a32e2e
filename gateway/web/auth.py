"""Signed, expiring user tokens (JWT, HS256) and hashed per-cluster ingest keys."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

import jwt

TOKEN_COOKIE = "gateway_token"


class InvalidToken(Exception):
    """The text is safe to show: it never contains the token."""


def issue_token(secret: str, user_id: int, ttl: int, now: float | None = None) -> str:
    now = time.time() if now is None else now
    return jwt.encode({"sub": str(user_id), "iat": int(now), "exp": int(now + ttl)}, secret, algorithm="HS256")


def verify_token(secret: str, token: str) -> int:
    """The user id a token was issued to; raises InvalidToken when forged, expired or malformed."""
    return token_session(secret, token)[0]


def token_session(secret: str, token: str) -> tuple[int, float]:
    """(user id, expiry as a Unix time) of a valid token; raises InvalidToken otherwise."""
    try:
        claims = jwt.decode(token, secret, algorithms=["HS256"], options={"require": ["sub", "exp"]})
        return int(claims["sub"]), float(claims["exp"])
    except jwt.ExpiredSignatureError:
        raise InvalidToken("token expired") from None
    except (jwt.InvalidTokenError, ValueError, TypeError):
        raise InvalidToken("invalid token") from None


def new_cluster_key(cluster_id: int) -> tuple[str, str]:
    """A fresh ingest key for a cluster and the hash to store; the key is shown once."""
    key = f"c{cluster_id}.{secrets.token_urlsafe(24)}"
    return key, hash_key(key)


def hash_key(key: str) -> str:
    # Keys are 192 random bits, so a fast hash is enough: nothing to brute-force.
    return hashlib.sha256(key.encode()).hexdigest()


def cluster_of_key(key: str) -> int | None:
    head, sep, _ = key.partition(".")
    if not sep or not head.startswith("c") or not head[1:].isdigit() or len(head) > 20:
        return None
    return int(head[1:])


def key_matches(key: str, stored_hash: str | None) -> bool:
    return stored_hash is not None and hmac.compare_digest(hash_key(key), stored_hash)
