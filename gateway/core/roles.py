"""What each role in a team may do, and who may call each HTTP route: the one place these are decided.

A team's members see everything of their team and act on its jobs; owners and admins also manage its members,
their roles and its clusters' keys. Among managers, only an owner makes or unmakes owners, and a team keeps at
least one owner. `gateway.web.http.guards.may` applies the table to a request; tests/integration/test_roles.py calls
every route of the app as each role and holds the answers to it.
"""

from __future__ import annotations

from typing import NamedTuple

ROLES = ("owner", "admin", "member")

SEE = "see"  # read the team's jobs, trajectories, submissions and members
ACT = "act"  # act on the team's jobs (kill, retry, remove, delete an analysis)
MANAGE = "manage"  # add and remove members, change roles, add, re-key and remove clusters
AUDIT = "audit"  # read who did what in the team (its activity)

WHAT = {
    SEE: "see the team",
    ACT: "act on its jobs",
    MANAGE: "manage its members and clusters",
    AUDIT: "read its activity",
}

MAY: dict[str, frozenset[str]] = {
    "owner": frozenset({SEE, ACT, MANAGE, AUDIT}),
    "admin": frozenset({SEE, ACT, MANAGE, AUDIT}),
    "member": frozenset({SEE, ACT}),
}

# Who may call each route (method, path as the app's route table spells it): `anyone`; a `cluster` by its key;
# any signed-in `user` (their own account); a `platform` administrator (users.platform_admin, who also manages
# every team as an owner would); or a member of the team the route names with the right to SEE, ACT,
# MANAGE or AUDIT. A route missing here fails the role test: every new route needs a decision.
ROUTE_ACCESS: dict[tuple[str, str], str] = {
    ("GET", "/ws"): "user",
    ("POST", "/api/ingest/jobs"): "cluster",
    ("POST", "/api/ingest/trajectories"): "cluster",
    ("POST", "/api/ingest/analyses"): "cluster",
    ("POST", "/api/ingest/metrics"): "cluster",
    ("POST", "/api/ingest/confirmations"): "cluster",
    ("POST", "/api/ingest/submissions"): "cluster",
    ("POST", "/api/ingest/submissions/{id:int}"): "cluster",
    ("POST", "/api/ingest/instance-types"): "cluster",
    ("GET", "/api/me"): "user",
    ("GET", "/api/teams/{id:int}/members"): SEE,
    ("POST", "/api/teams/{id:int}/members"): MANAGE,
    ("DELETE", "/api/teams/{id:int}/members/{user:int}"): MANAGE,
    ("GET", "/api/teams/{id:int}/clusters"): SEE,
    ("POST", "/api/teams/{id:int}/clusters"): MANAGE,
    ("POST", "/api/teams/{id:int}/clusters/{cluster:int}/key"): MANAGE,
    ("DELETE", "/api/teams/{id:int}/clusters/{cluster:int}"): MANAGE,
    ("GET", "/api/admin/teams"): "platform",
    ("POST", "/api/admin/teams"): "platform",
    ("DELETE", "/api/admin/teams/{id:int}"): "platform",
    ("GET", "/api/admin/users"): "platform",
    ("POST", "/api/admin/users"): "platform",
    ("DELETE", "/api/admin/users/{id:int}"): "platform",
    ("POST", "/api/trajectories/{id:int}/remove-running"): ACT,
    ("GET", "/api/trajectories/{id:int}/remove-running/preview"): SEE,
    ("GET", "/api/trajectories/{id:int}/retry-failed/preview"): SEE,
    ("POST", "/api/trajectories/{id:int}/retry-failed"): ACT,
    ("POST", "/api/analyses/{id:int}/retry-failed"): ACT,
    ("POST", "/api/submissions/actions"): ACT,
    ("POST", "/api/submissions/actions/preview"): SEE,
    ("GET", "/api/submissions/instance-types"): SEE,
    ("GET", "/api/trajectories/{id:int}"): SEE,
    ("GET", "/api/trajectories/{id:int}/analyses"): SEE,
    ("DELETE", "/api/analyses/{id:int}"): ACT,
    ("GET", "/api/teams/{id:int}/trajectories"): SEE,
    ("GET", "/api/teams/{id:int}/trajectories/active"): SEE,
    ("GET", "/api/teams/{id:int}/submissions"): SEE,
    ("GET", "/api/teams/{id:int}/submissions.csv"): SEE,
    ("GET", "/api/teams/{id:int}/projects"): SEE,
    ("GET", "/api/teams/{id:int}/activity"): AUDIT,
    ("GET", "/api/teams/{id:int}/activity.csv"): AUDIT,
    ("GET", "/api/teams/{id:int}/views"): SEE,
    ("POST", "/api/teams/{id:int}/views"): SEE,
    ("PUT", "/api/teams/{id:int}/views/default"): SEE,
    ("PUT", "/api/teams/{id:int}/views/order"): SEE,
    ("PUT", "/api/teams/{id:int}/views/{view:int}"): SEE,
    ("DELETE", "/api/teams/{id:int}/views/{view:int}"): SEE,
    ("GET", "/api/sign-in/users"): "anyone",
    ("POST", "/api/sign-in"): "anyone",
    ("POST", "/api/sign-out"): "anyone",
    ("GET", "/api/account"): "user",
    ("POST", "/api/account/sessions/{id:int}/revoke"): "user",
    ("PUT", "/api/account/preferences"): "user",
    ("POST", "/sign-in"): "anyone",
    ("POST", "/api/session/renew"): "user",
    ("GET", "/healthz"): "anyone",
    ("GET", "/readyz"): "anyone",
    ("GET", "/metrics"): "anyone",
    ("GET", "/asyncapi.json"): "anyone",
    ("GET", "/openapi.json"): "anyone",
    ("GET", "/"): "anyone",
    ("GET", "/submissions"): "anyone",
    ("GET", "/submissions/lifecycle.svg"): "anyone",
}


def may(role: str | None, what: str, platform_admin: bool = False) -> bool:
    """Whether a member with `role` (None: not a member) may do `what` (SEE, ACT, MANAGE or AUDIT) in the team. A
    platform administrator manages every team (its members and clusters), and sees its jobs only as a member."""
    if platform_admin and what == MANAGE:
        return True
    return role is not None and what in MAY.get(role, frozenset())


class Refusal(NamedTuple):
    kind: str  # invalid (a role that is none), forbidden (not this manager's to do), last_owner
    message: str


LAST_OWNER = Refusal("last_owner", "a team keeps at least one owner: make another member an owner first")


def refuse_role(actor: str, before: str | None, after: str, owners: int) -> Refusal | None:
    """Why `actor` (a manager) may not give a user the role `after` (`before`: their role now, None when they are
    not a member; `owners`: how many the team has now); None when they may."""
    if after not in ROLES:
        return Refusal("invalid", f"role: expected one of {', '.join(ROLES)}, got {after!r}")
    if "owner" in (before, after) and before != after and actor != "owner":
        return Refusal("forbidden", "only an owner may make or unmake an owner")
    if before == "owner" and after != "owner" and owners <= 1:
        return LAST_OWNER
    return None


def refuse_removal(actor: str, role: str, owners: int) -> Refusal | None:
    """Why `actor` (a manager) may not remove a member whose role is `role`; None when they may."""
    if role == "owner" and actor != "owner":
        return Refusal("forbidden", "only an owner may remove an owner")
    if role == "owner" and owners <= 1:
        return LAST_OWNER
    return None
