"""Sessions for the web app: the cookie that carries a user's token, and the token and key helpers the app uses
(they live in gateway.credentials, which the CLI and the demo's seed import without the web app)."""

from __future__ import annotations

from ...credentials import (
    Claims,
    InvalidToken,
    cluster_of_key,
    hash_key,
    issue_token,
    key_matches,
    new_cluster_key,
    read_token,
    verify_token,
)

TOKEN_COOKIE = "gateway_token"

__all__ = [
    "TOKEN_COOKIE",
    "Claims",
    "InvalidToken",
    "cluster_of_key",
    "hash_key",
    "issue_token",
    "key_matches",
    "new_cluster_key",
    "read_token",
    "verify_token",
]
