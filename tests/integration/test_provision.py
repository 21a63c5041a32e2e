"""A platform team sets tenants up from nothing with `gateway team | user | member | cluster`, by script: idempotent,
`--json` for scripts, exit 4 for what does not exist, and what it makes works on a live node at once."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from typing import Any

import asyncpg
import httpx

from gateway.credentials import issue_token
from harness.follower import Follower
from tests.conftest import Stack


def gateway(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        env={**keep, "DATABASE_URL": stack.database_url, "GATEWAY_SECRET": stack.secret},
        capture_output=True,
        text=True,
        timeout=120,
    )


def as_json(stack: Stack, *args: str) -> Any:
    done = gateway(stack, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_a_team_from_nothing_by_script_works_on_a_live_node(stack: Stack, pool: asyncpg.Pool) -> None:
    tag = secrets.token_hex(3)
    team = as_json(stack, "team", "create", f"Biophysics {tag}")
    assert team["created"] is True
    again = as_json(stack, "team", "create", f"Biophysics {tag}")
    assert again == {**team, "created": False}  # a script run twice finds what its first run made

    ada = as_json(stack, "user", "create", f"Ada {tag}")
    assert ada["platform_admin"] is False
    bot = as_json(stack, "user", "create", f"bot {tag}", "--platform-admin")
    assert bot["platform_admin"] is True  # its token may call /api/admin/... (tests/integration/test_roles.py)
    assert as_json(stack, "user", "create", f"bot {tag}")["platform_admin"] is True  # found again, still one
    assert (
        as_json(stack, "member", "add", "--team", str(team["id"]), "--user", str(ada["id"]), "--role", "owner")[
            "membership"
        ]
        == "added"
    )
    changed = as_json(stack, "member", "add", "--team", str(team["id"]), "--user", str(ada["id"]), "--role", "admin")
    assert changed["membership"] == "changed"
    assert as_json(stack, "member", "list", "--team", str(team["id"])) == [
        {"team_id": team["id"], "user_id": ada["id"], "name": f"Ada {tag}", "role": "admin"}
    ]

    cluster = as_json(stack, "cluster", "create", "--team", str(team["id"]), "gpu-a")
    assert cluster["created"] is True and cluster["key"].startswith(f"c{cluster['id']}.")
    found = as_json(stack, "cluster", "create", "--team", str(team["id"]), "gpu-a")
    assert found["id"] == cluster["id"] and found["key"] is None  # a key is shown once

    token = gateway(stack, "token", "--user", str(ada["id"])).stdout.strip()
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        me = (await client.get("/api/me", headers={"Authorization": f"Bearer {token}"})).json()
        assert {"id": team["id"], "name": f"Biophysics {tag}"} in [
            {"id": t["id"], "name": t["name"]} for t in me["teams"]
        ]
        metrics = {"cpu": 50.0, "memory": 40.0, "disk": 30.0, "network": 1.0}
        sent = await client.post(
            "/api/ingest/metrics", json=metrics, headers={"Authorization": f"Bearer {cluster['key']}"}
        )
        assert sent.status_code == 204, sent.text

    # Removing a member ends their live subscriptions: the membership goes through the outbox like any writer's.
    async with Follower(stack.nodes[1].ws, issue_token(stack.secret, ada["id"], 600)) as f:
        channel = f"team:{team['id']}"
        await f.subscribe(channel)
        await f.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=30)
        removed = gateway(stack, "member", "remove", "--team", str(team["id"]), "--user", str(ada["id"]))
        assert removed.returncode == 0, removed.stderr
        await f.wait_for(lambda f: any(e.get("channel") == channel for e in f.errors), timeout=30)
        assert [e["code"] for e in f.errors] == ["forbidden"]
    gone = gateway(stack, "member", "remove", "--team", str(team["id"]), "--user", str(ada["id"]))
    assert (gone.returncode, gone.stderr.strip()) == (
        4,
        f"gateway: user {ada['id']} is not a member of team {team['id']}",
    )

    # A team that holds jobs is not removed by accident; with --with-jobs it goes, jobs and all.
    trajectory = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, 't') returning id", team["id"]
    )
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name) values ($1, $2, $3, 'preprocess', 'p')",
        team["id"],
        trajectory,
        cluster["id"],
    )
    listed = next(t for t in as_json(stack, "team", "list") if t["id"] == team["id"])
    assert (listed["members"], listed["clusters"], listed["jobs"]) == (0, 1, 1), listed
    held = gateway(stack, "team", "remove", str(team["id"]))
    assert held.returncode == 4 and "still holds 1 job(s): pass --with-jobs" in held.stderr, held.stderr
    assert as_json(stack, "team", "remove", str(team["id"]), "--with-jobs") == {"id": team["id"], "removed": True}
    assert await pool.fetchval("select count(*) from jobs where team_id = $1", team["id"]) == 0
    assert team["id"] not in [t["id"] for t in as_json(stack, "team", "list")]
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        sent = await client.post(
            "/api/ingest/metrics", json=metrics, headers={"Authorization": f"Bearer {cluster['key']}"}
        )
        assert sent.status_code == 401  # its clusters went with it, and their keys


def test_what_does_not_exist_is_refused_with_4(stack: Stack) -> None:
    for args, says in [
        (("member", "add", "--team", "999999999", "--user", "1"), "no team 999999999"),
        (("cluster", "create", "--team", "999999999", "gpu"), "no team 999999999"),
        (("team", "remove", "999999999"), "no team 999999999"),
        (("user", "remove", "999999999"), "no user 999999999"),
        (("cluster", "remove", "999999999"), "no cluster 999999999"),
        (("member", "list", "--team", "999999999"), "no team 999999999"),
        (("token", "--user", "999999999"), "no user 999999999"),
    ]:
        done = gateway(stack, *args)
        assert (done.returncode, done.stderr.strip()) == (4, f"gateway: {says}"), args
