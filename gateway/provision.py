"""`gateway team | user | member | cluster`: a platform team's way to set tenants up from nothing, by script.

Every action is idempotent (creating what exists finds it; removing what is gone says so with exit 4), prints one
line per thing for a person or, with `--json`, one JSON document for a script. A cluster's key is printed once,
when the cluster is made; `gateway cluster-key` issues a new one.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from . import exits
from .credentials import new_cluster_key
from .exits import CommandFailed
from .store import clusters as stored_clusters
from .store import tenants
from .store.connections import connect
from .store.queries import user_exists
from .store.types import Connection

Command = Callable[[str, str, str], argparse.ArgumentParser]
Action = Callable[[Connection, argparse.Namespace], Awaitable[Any]]


def add_commands(
    command: Command, ident: Callable[[str], float], run: Callable[..., None], common: argparse.ArgumentParser
) -> None:
    """The four commands and their actions, on the CLI's parser (`command` makes one, `run` carries it out;
    `common`: the options every command takes, --database-url among them)."""

    def actions(name: str, summary: str, details: str) -> Any:  # argparse's subparsers: its type is private
        p = command(name, summary, details + " Needs DATABASE_URL. --json prints one JSON document.")
        p.set_defaults(func=run)
        return p.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(group: Any, name: str, does: Action, help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(
            name, help=help, description=f"{help[0].upper()}{help[1:]}.", parents=[common]
        )
        p.add_argument("--json", action="store_true", help="print JSON for a script")
        p.set_defaults(act=does)
        return p

    teams = actions("team", "create, list or remove teams", "A team's name is its identity here: create is idempotent.")
    action(teams, "create", _create_team, "create a team (or find it by name)").add_argument("name")
    action(teams, "list", _list_teams, "list every team with its members, clusters and jobs")
    p = action(teams, "remove", _remove_team, "remove a team with its members, clusters and trajectories")
    p.add_argument("id", type=ident)
    p.add_argument("--with-jobs", action="store_true", help="remove its jobs too (refused otherwise)")

    users = actions("user", "create, list or remove users", "A user's name is its identity here: create is idempotent.")
    p = action(users, "create", _create_user, "create a user (or find them by name)")
    p.add_argument("name")
    p.add_argument(
        "--platform-admin",
        action="store_true",
        help="their token may call /api/admin/... and manage every team (docs/operations.md)",
    )
    action(users, "list", _list_users, "list users").add_argument("--team", type=ident, help="only this team's")
    action(users, "remove", _remove_user, "remove a user (their sessions end)").add_argument("id", type=ident)

    members = actions(
        "member",
        "add, list or remove a team's members and set their roles",
        "Owners and admins manage members, roles and cluster keys; members act on jobs.",
    )
    p = action(members, "add", _add_member, "make a user a member of a team with a role (or change their role)")
    p.add_argument("--team", type=ident, required=True)
    p.add_argument("--user", type=ident, required=True)
    p.add_argument("--role", choices=tenants.ROLES, default="member")
    action(members, "list", _list_members, "list a team's members").add_argument("--team", type=ident, required=True)
    p = action(members, "remove", _remove_member, "remove a user from a team (their live subscriptions end)")
    p.add_argument("--team", type=ident, required=True)
    p.add_argument("--user", type=ident, required=True)

    clusters = actions(
        "cluster",
        "create, list or remove a team's clusters",
        "Creating a cluster prints its ingest key once (only its hash is stored).",
    )
    p = action(clusters, "create", _create_cluster, "create a team's cluster and print its key (or find it by name)")
    p.add_argument("--team", type=ident, required=True)
    p.add_argument("name")
    action(clusters, "list", _list_clusters, "list clusters").add_argument("--team", type=ident, help="one team's")
    p = action(clusters, "remove", _remove_cluster, "remove a cluster (its key stops working)")
    p.add_argument("id", type=ident)
    p.add_argument("--with-jobs", action="store_true", help="remove its jobs too (refused otherwise)")


async def carry_out(database_url: str, args: argparse.Namespace) -> None:
    """Run the parsed action on one connection and print what it did."""
    db = await connect(database_url)
    try:
        shown = await args.act(db, args)
    finally:
        await db.close()
    print(json.dumps(shown, default=str) if args.json else _lines(shown))


def _lines(shown: Any) -> str:
    rows: Sequence[dict[str, Any]] = shown if isinstance(shown, list) else [shown]
    if not rows:
        return "(none)"
    return "\n".join("  ".join(f"{k}={v}" for k, v in row.items()) for row in rows)


async def _create_team(db: Connection, args: argparse.Namespace) -> dict[str, Any]:
    team_id, made = await tenants.create_team(db, args.name)
    return {"id": team_id, "name": args.name, "created": made}


async def _list_teams(db: Connection, args: argparse.Namespace) -> list[dict[str, Any]]:
    return [t._asdict() for t in await tenants.teams(db)]


async def _remove_team(db: Connection, args: argparse.Namespace) -> dict[str, Any]:
    try:
        if not await tenants.remove_team(db, args.id, args.with_jobs):
            raise CommandFailed(exits.REFUSED, f"no team {args.id}")
    except tenants.Holding as exc:
        raise CommandFailed(exits.REFUSED, str(exc)) from None
    return {"id": args.id, "removed": True}


async def _create_user(db: Connection, args: argparse.Namespace) -> dict[str, Any]:
    user_id, made = await tenants.create_user(db, args.name)
    if args.platform_admin:
        await tenants.set_platform_admin(db, user_id, True)
    admin = await tenants.is_platform_admin(db, user_id)
    return {"id": user_id, "name": args.name, "created": made, "platform_admin": admin}


async def _list_users(db: Connection, args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.team is not None:
        await _team(db, args.team)
    return [u._asdict() for u in await tenants.users(db, args.team)]


async def _remove_user(db: Connection, args: argparse.Namespace) -> dict[str, Any]:
    if not await tenants.remove_user(db, args.id):
        raise CommandFailed(exits.REFUSED, f"no user {args.id}")
    return {"id": args.id, "removed": True}


async def _add_member(db: Connection, args: argparse.Namespace) -> dict[str, Any]:
    await _team(db, args.team)
    if not await user_exists(db, args.user):
        raise CommandFailed(exits.REFUSED, f"no user {args.user}")
    done = await tenants.set_member(db, args.team, args.user, args.role)
    return {"team": args.team, "user": args.user, "role": args.role, "membership": done}


async def _list_members(db: Connection, args: argparse.Namespace) -> list[dict[str, Any]]:
    await _team(db, args.team)
    return [m._asdict() for m in await tenants.members(db, args.team)]


async def _remove_member(db: Connection, args: argparse.Namespace) -> dict[str, Any]:
    if not await tenants.remove_member(db, args.team, args.user):
        raise CommandFailed(exits.REFUSED, f"user {args.user} is not a member of team {args.team}")
    return {"team": args.team, "user": args.user, "removed": True}


async def _create_cluster(db: Connection, args: argparse.Namespace) -> dict[str, Any]:
    await _team(db, args.team)
    cluster_id, made = await tenants.create_cluster(db, args.team, args.name)
    key = None
    if made:  # shown once: a cluster found again keeps its key (`gateway cluster-key` issues a new one)
        key, key_hash = new_cluster_key(cluster_id)
        await stored_clusters.set_key_hash(db, cluster_id, key_hash)
    return {"id": cluster_id, "team": args.team, "name": args.name, "created": made, "key": key}


async def _list_clusters(db: Connection, args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.team is not None:
        await _team(db, args.team)
    return [c._asdict() for c in await tenants.clusters(db, args.team)]


async def _remove_cluster(db: Connection, args: argparse.Namespace) -> dict[str, Any]:
    try:
        if not await tenants.remove_cluster(db, args.id, args.with_jobs):
            raise CommandFailed(exits.REFUSED, f"no cluster {args.id}")
    except tenants.Holding as exc:
        raise CommandFailed(exits.REFUSED, str(exc)) from None
    return {"id": args.id, "removed": True}


async def _team(db: Connection, team_id: int) -> None:
    if not await tenants.team_exists(db, team_id):
        raise CommandFailed(exits.REFUSED, f"no team {team_id}")
