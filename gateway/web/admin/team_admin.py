"""A team's owners and admins manage its members, their roles and its clusters: the My Team and Clusters pages'
controls, and the same calls for an automation holding an owner's or admin's token (`gateway token --user ID`).

Each write goes through gateway.store.tenants, as `gateway member|cluster` does, and is idempotent like it: adding
a member with the role they have, or removing one who is not there, changes nothing and says so. Role changes lock
the team's memberships first, so two managers at once cannot take away its last owner.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...core import roles
from ...core.types import MAX_ID
from ...credentials import new_cluster_key
from ...store import clusters as stored_clusters
from ...store import tenants
from ...store.types import Connection
from ..http.answers import answer
from ..http.guards import Refused, decode, endpoint, may, path_id, runtime_of, user

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
UserId = Annotated[int, msgspec.Meta(ge=1, le=MAX_ID)]


class MemberChange(msgspec.Struct, forbid_unknown_fields=True):
    """A user (their id, or their name) to make a member of the team with a role."""

    user: UserId | Name
    role: str = "member"


class Membership(msgspec.Struct):
    """`result`: added, changed (they had another role) or unchanged (they had this one)."""

    team: int
    user: int
    role: str
    result: str


class MemberRemoved(msgspec.Struct):
    """`removed`: false when the user was not a member (nothing changed)."""

    team: int
    user: int
    removed: bool


class NewCluster(msgspec.Struct, forbid_unknown_fields=True):
    name: Name


class ClusterMade(msgspec.Struct):
    """`key`: the cluster's ingest key, shown this once (only its hash is kept); null when the cluster was found
    by its name and keeps its key."""

    id: int
    team: int
    name: str
    created: bool
    key: str | None


class ClusterKey(msgspec.Struct):
    """A new ingest key, shown this once: the cluster's previous key stops working now."""

    id: int
    key: str


class ClusterRemoved(msgspec.Struct):
    id: int
    removed: bool


class ClusterRow(msgspec.Struct):
    id: int
    name: str
    has_key: bool
    jobs: int
    heard_at: float | None  # seconds since the Unix epoch; null: never heard from


class TeamClusters(msgspec.Struct):
    """The team's clusters, and the caller's role (the Clusters page shows managers its controls)."""

    clusters: list[ClusterRow]
    role: str


_member_change = msgspec.json.Decoder(MemberChange)
_new_cluster = msgspec.json.Decoder(NewCluster)


def _text(value: str, field: str) -> str:
    if "\x00" in value:
        raise Refused(422, "invalid", f"{field}: NUL is not allowed in text")
    return value


def _refused(refusal: roles.Refusal) -> Refused:
    status = {"invalid": 422, "forbidden": 403, "last_owner": 409}[refusal.kind]
    return Refused(status, refusal.kind, refusal.message)


async def _manager(request: Request) -> tuple[int, int]:
    """(team id, caller) when the caller manages the team the path names: 401, then 403 otherwise."""
    team_id = path_id(request)
    caller = user(request, acting=True)
    await may(request, caller, team_id, roles.MANAGE)
    return team_id, caller


async def _locked_role(db: Connection, team_id: int, caller: int) -> tuple[str, dict[int, str]]:
    held = await tenants.lock_roles(db, team_id)
    actor = held.get(caller)
    if not roles.may(actor, roles.MANAGE) and roles.may(
        None, roles.MANAGE, await tenants.is_platform_admin(db, caller)
    ):
        actor = "owner"  # a platform administrator manages every team as its owner would
    if not roles.may(actor, roles.MANAGE):  # demoted or removed since the first check
        raise Refused(403, "forbidden", "you no longer manage this team")
    assert actor is not None
    return actor, held


@endpoint
async def add_member(request: Request) -> Response:
    team_id, caller = await _manager(request)
    change = await decode(request, _member_change)
    if isinstance(change.user, str):
        _text(change.user, "$.user")
    if change.role not in roles.ROLES:
        raise Refused(422, "invalid", f"role: expected one of {', '.join(roles.ROLES)}, got {change.role[:40]!r}")
    async with runtime_of(request).pool.acquire() as db, db.transaction():
        actor, held = await _locked_role(db, team_id, caller)
        user_id = await tenants.find_user(db, change.user)
        if user_id is None:
            raise Refused(404, "not_found", f"no user {change.user!r}: `gateway user create` makes one")
        owners = sum(1 for r in held.values() if r == "owner")
        if refusal := roles.refuse_role(actor, held.get(user_id), change.role, owners):
            raise _refused(refusal)
        result = await tenants.set_member(db, team_id, user_id, change.role)
    return answer(Membership(team_id, user_id, change.role, result))


@endpoint
async def remove_member(request: Request) -> Response:
    team_id, caller = await _manager(request)
    user_id = path_id(request, "user")
    async with runtime_of(request).pool.acquire() as db, db.transaction():
        actor, held = await _locked_role(db, team_id, caller)
        role = held.get(user_id)
        if role is None:
            return answer(MemberRemoved(team_id, user_id, False))
        owners = sum(1 for r in held.values() if r == "owner")
        if refusal := roles.refuse_removal(actor, role, owners):
            raise _refused(refusal)
        removed = await tenants.remove_member(db, team_id, user_id)
    return answer(MemberRemoved(team_id, user_id, removed))


@endpoint
async def team_clusters(request: Request) -> Response:
    team_id = path_id(request)
    role = await may(request, user(request), team_id, roles.SEE)
    rows = await tenants.clusters(runtime_of(request).pool, team_id)
    shown = [ClusterRow(c.id, c.name, c.has_key, c.jobs, c.heard_at.timestamp() if c.heard_at else None) for c in rows]
    return answer(TeamClusters(shown, role))


@endpoint
async def add_cluster(request: Request) -> Response:
    team_id, _ = await _manager(request)
    name = _text((await decode(request, _new_cluster)).name, "$.name")
    async with runtime_of(request).pool.acquire() as db:
        cluster_id, made = await tenants.create_cluster(db, team_id, name)
        key = None
        if made:  # shown once, as `gateway cluster create` prints it
            key, key_hash = new_cluster_key(cluster_id)
            await stored_clusters.set_key_hash(db, cluster_id, key_hash)
    return answer(ClusterMade(cluster_id, team_id, name, made, key))


async def _teams_cluster(request: Request, team_id: int) -> int:
    cluster_id = path_id(request, "cluster")
    found = await tenants.clusters(runtime_of(request).pool, team_id)
    if not any(c.id == cluster_id for c in found):
        raise Refused(404, "not_found", f"no cluster {cluster_id} in team {team_id}")
    return cluster_id


@endpoint
async def rotate_cluster_key(request: Request) -> Response:
    team_id, _ = await _manager(request)
    cluster_id = await _teams_cluster(request, team_id)
    key, key_hash = new_cluster_key(cluster_id)
    if not await stored_clusters.set_key_hash(runtime_of(request).pool, cluster_id, key_hash):
        raise Refused(404, "not_found", f"no cluster {cluster_id} in team {team_id}")
    return answer(ClusterKey(cluster_id, key))


@endpoint
async def remove_cluster(request: Request) -> Response:
    team_id, _ = await _manager(request)
    cluster_id = path_id(request, "cluster")
    with_jobs = request.query_params.get("with_jobs", "") in ("1", "true")
    found = await tenants.clusters(runtime_of(request).pool, team_id)
    if not any(c.id == cluster_id for c in found):
        return answer(ClusterRemoved(cluster_id, False))  # gone already (or never this team's): nothing changes
    async with runtime_of(request).pool.acquire() as db:
        try:
            removed = await tenants.remove_cluster(db, cluster_id, with_jobs)
        except tenants.Holding as holding:
            message = f"cluster {cluster_id} still holds {holding.jobs:,} job(s): pass ?with_jobs=true to remove them"
            raise Refused(409, "holds_jobs", message) from None
    return answer(ClusterRemoved(cluster_id, removed))
