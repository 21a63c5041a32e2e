"""`gateway tail` as a script runs it: JSON lines on stdout, one-line failures with their exit status, a quiet
end when the pipe's reader goes away, and tokens renewed through --token-command."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys

import asyncpg

from gateway.embedded import free_port
from gateway.tail import EXIT_CANNOT_CONNECT, EXIT_REFUSED, EXIT_UNAUTHORIZED
from gateway.web.people.auth import issue_token
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs, make_team

DEADLINE = 20.0
TAIL = [sys.executable, "-m", "gateway.cli", "tail"]


def tail_env(stack: Stack, token: str, url: str | None = None) -> dict[str, str]:
    return {
        **os.environ,
        "GATEWAY_URL": url or stack.nodes[0].http,
        "GATEWAY_TOKEN": token,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_LOG_LEVEL": "INFO",  # the renewal test reads the client's log
    }


async def start_tail(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *TAIL, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )


async def failure(env: dict[str, str], *args: str) -> tuple[int | None, str]:
    """The exit status and the standard error of a tail that is expected to end by itself."""
    proc = await start_tail(env, *args)
    _, err = await asyncio.wait_for(proc.communicate(), DEADLINE)
    return proc.returncode, err.decode()


def last_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    return stderr.strip().splitlines()[-1]


async def test_gateway_tail_prints_one_json_line_per_message(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    proc = await start_tail(tail_env(stack, team.token), "--team", str(team.id), "--format", "msgpack")
    try:
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 10))  # type: ignore[union-attr]
        assert (first["type"], first["channel"]) == ("snapshot", f"team-jobs:{team.id}")
        (job_id,) = await insert_jobs(pool, team, 1)
        line = json.loads(await asyncio.wait_for(proc.stdout.readline(), 10))  # type: ignore[union-attr]
        assert line["type"] == "batch" and [j["id"] for j in line["jobs"]] == [job_id]
    finally:
        proc.terminate()
        await proc.wait()


async def test_gateway_tail_ends_with_one_line_when_its_token_expires(stack: Stack, team: Team) -> None:
    status, stderr = await failure(tail_env(stack, issue_token(stack.secret, team.user_id, 2)), "--team", str(team.id))
    assert status == EXIT_UNAUTHORIZED
    assert last_line(stderr).startswith("gateway: token expired: ") and "--token-command" in last_line(stderr)


async def test_gateway_tail_renews_its_token_with_token_command(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    command = shlex.join([*TAIL[:3], "token", "--user", str(team.user_id), "--ttl", "3"])
    env = tail_env(stack, issue_token(stack.secret, team.user_id, 2))
    proc = await start_tail(env, "--team", str(team.id), "--token-command", command)
    stderr: list[str] = []

    async def read_stderr() -> None:
        async for line in proc.stderr:  # type: ignore[union-attr]
            stderr.append(line.decode())

    reading = asyncio.create_task(read_stderr())
    try:
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), DEADLINE))  # type: ignore[union-attr]
        assert first["type"] == "snapshot"
        deadline = asyncio.get_running_loop().time() + DEADLINE
        while not any("renewed the token" in line for line in stderr):
            assert proc.returncode is None and asyncio.get_running_loop().time() < deadline, "".join(stderr)
            await asyncio.sleep(0.05)
        (job_id,) = await insert_jobs(pool, team, 1)
        while True:  # a job inserted after the renewal still arrives
            line = json.loads(await asyncio.wait_for(proc.stdout.readline(), DEADLINE))  # type: ignore[union-attr]
            if job_id in [j["id"] for j in line.get("jobs") or ()]:
                break
    finally:
        proc.terminate()
        await proc.wait()
        await reading
    assert proc.returncode == 0 and "Traceback" not in "".join(stderr)


async def test_gateway_tail_names_a_forbidden_channel(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    other = await make_team(pool, stack.secret)
    status, stderr = await failure(tail_env(stack, team.token), "--team", str(other.id))
    assert status == EXIT_REFUSED
    assert last_line(stderr).startswith(f"gateway: forbidden: team-jobs:{other.id} ")


async def test_gateway_tail_gives_up_after_its_attempts(stack: Stack, team: Team) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    status, stderr = await failure(tail_env(stack, team.token, url), "--team", str(team.id), "--attempts", "2")
    assert status == EXIT_CANNOT_CONNECT
    assert last_line(stderr) == f"gateway: cannot connect to ws{url[4:]}/ws after 2 attempts: connection refused"


async def test_gateway_tail_into_head_exits_quietly(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    script = f"set -o pipefail; {shlex.join([*TAIL, '--team', str(team.id)])} | head -n 3"
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        script,
        env=tail_env(stack, team.token),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    done = asyncio.create_task(proc.communicate())
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not done.done():  # the trajectory keeps getting jobs: tail has more to write after head is gone
        assert asyncio.get_running_loop().time() < deadline, "tail | head -n 3 did not end"
        await insert_jobs(pool, team, 1)
        await asyncio.wait([done], timeout=0.2)
    out, err = done.result()
    assert proc.returncode == 0, err.decode()  # pipefail: tail's own status too
    assert len(out.decode().splitlines()) == 3 and "Traceback" not in err.decode() and "BrokenPipe" not in err.decode()


async def test_gateway_tail_into_head_exits_while_the_feed_is_quiet(stack: Stack, team: Team) -> None:
    script = f"set -o pipefail; {shlex.join([*TAIL, '--team', str(team.id)])} | head -n 1"
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        script,
        env=tail_env(stack, team.token),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), DEADLINE)  # only the snapshot: nothing more to write
    assert proc.returncode == 0 and json.loads(out)["type"] == "snapshot"
    assert "Traceback" not in err.decode()
