"""Revoked sessions in PostgreSQL: recorded by `gateway revoke` and sign-outs, loaded by every node."""

from __future__ import annotations

from ..core.revocation import Revocation
from .types import Database


async def record(db: Database, max_age: float, user_id: int | None = None, token_id: str | None = None) -> Revocation:
    """Store a revocation (timed by the database's clock) and delete those too old to end any session."""
    at = await db.fetchval(
        "with aged as (delete from token_revocations where revoked_at < now() - make_interval(secs => $3))"
        " insert into token_revocations (user_id, token_id) values ($1, $2)"
        " returning extract(epoch from revoked_at)::float8",
        user_id,
        token_id,
        float(max_age),
    )
    return Revocation(at=float(at), user_id=user_id, token_id=token_id)


async def load(db: Database, max_age: float) -> list[Revocation]:
    rows = await db.fetch(
        "select user_id, token_id, extract(epoch from revoked_at)::float8 as at from token_revocations"
        " where revoked_at >= now() - make_interval(secs => $1)",
        float(max_age),
    )
    return [Revocation(at=r["at"], user_id=r["user_id"], token_id=r["token_id"]) for r in rows]
