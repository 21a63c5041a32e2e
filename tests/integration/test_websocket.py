"""The websocket handshake, bad input, the MessagePack subprotocol, slow consumers and log hygiene."""

from __future__ import annotations

import asyncio
import json
import socket

import asyncpg
import httpx
import msgspec
import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gateway.web.people.auth import issue_token
from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs


async def refused(url: str, **kwargs: object) -> InvalidStatus:
    with pytest.raises(InvalidStatus) as info:
        async with websockets.connect(url, **kwargs):  # type: ignore[arg-type]
            pass
    return info.value


async def test_bad_origin_is_refused_at_handshake(stack: Stack, team: Team) -> None:
    error = await refused(
        stack.nodes[0].ws, origin="https://evil.example", additional_headers={"Authorization": f"Bearer {team.token}"}
    )
    assert error.response.status_code == 403
    assert json.loads(error.response.body)["error"] == "origin_not_allowed"


async def test_same_origin_is_accepted(stack: Stack, team: Team) -> None:
    origin = f"http://127.0.0.1:{stack.nodes[0].port}"
    async with Follower(stack.nodes[0].ws, team.token, origin=origin) as f:
        await f.subscribe(f"team:{team.id}")
        await f.wait_for(lambda f: f.channels[f"team:{team.id}"].snapshot_done)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (None, "missing token"),
        ("not-a-token", "invalid token"),
        ("forged", "invalid token"),
        ("expired", "token expired"),
    ],
)
async def test_bad_tokens_are_refused_at_handshake(stack: Stack, team: Team, token: str | None, message: str) -> None:
    if token == "forged":
        token = issue_token("someone else's secret, long enough to sign", team.user_id, 3600)
    elif token == "expired":
        token = issue_token(stack.secret, team.user_id, -10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    error = await refused(stack.nodes[0].ws, additional_headers=headers)
    assert error.response.status_code == 401
    assert json.loads(error.response.body) == {"error": "unauthorized", "message": message}


async def test_token_in_query_string_works_and_never_reaches_the_logs(stack: Stack, team: Team) -> None:
    url = f"{stack.nodes[1].ws}?token={team.token}"
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps({"type": "ping", "id": "q"}))
        assert json.loads(await ws.recv())["id"] == "q"
    await refused(f"{stack.nodes[1].ws}?token={team.token}x")
    await asyncio.sleep(0.2)
    for process in (*stack.nodes, stack.relay):
        log = process.output()
        assert team.token not in log
        assert team.token[:40] not in log
    assert "token=[redacted]" in stack.nodes[1].output()


async def test_bad_frames_get_clear_errors_and_the_connection_keeps_serving(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    async with Follower(stack.nodes[0].ws, team.token) as f:
        for frame in (
            '{"type": "subscribe"',
            '{"type": "explode"}',
            '{"type": "subscribe", "channel": "team:1", "extra": 1}',
            "[1, 2, 3]",
            b"\x00\x01binary",
            '{"type": "subscribe", "channel": "teams:1"}',
            '{"type": "subscribe", "channel": "team:abc"}',
        ):
            await f.send_raw(frame)
        await f.wait_for(lambda f: len(f.errors) == 7)
        codes = [e["code"] for e in f.errors]
        assert codes == ["bad_message"] * 5 + ["bad_channel"] * 2
        assert "malformed json" in f.errors[0]["message"]
        assert f.errors[1]["message"] == "Invalid value 'explode' - at `$.type`"
        assert "extra" in f.errors[2]["message"]
        (job_id,) = await insert_jobs(pool, team, 1)
        await f.subscribe(f"trajectory:{team.trajectory_id}")
        await f.wait_for(lambda f: job_id in f.listed(f"trajectory:{team.trajectory_id}"))


async def test_oversize_message_closes_with_1009(stack: Stack, team: Team) -> None:
    async with websockets.connect(
        stack.nodes[0].ws, additional_headers={"Authorization": f"Bearer {team.token}"}
    ) as ws:
        await ws.send(json.dumps({"type": "ping", "id": "x" * (128 << 10)}))
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), 5)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1009


async def test_msgpack_subprotocol_carries_the_same_messages(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    headers = {"Authorization": f"Bearer {team.token}"}
    async with websockets.connect(stack.nodes[1].ws, additional_headers=headers, subprotocols=["msgpack"]) as ws:
        assert ws.subprotocol == "msgpack"
        await ws.send(msgspec.msgpack.encode({"type": "subscribe", "channel": f"trajectory:{team.trajectory_id}"}))
        snapshot = msgspec.msgpack.decode(await ws.recv())
        assert snapshot["type"] == "snapshot" and snapshot["jobs"] == []
        (job_id,) = await insert_jobs(pool, team, 1)
        batch = msgspec.msgpack.decode(await asyncio.wait_for(ws.recv(), 5))
        assert batch["type"] == "batch" and batch["seq"] == snapshot["seq"] + 1
        assert [j["id"] for j in batch["jobs"]] == [job_id]
        await ws.send('{"type": "ping"}')  # text on a msgpack connection
        error = msgspec.msgpack.decode(await asyncio.wait_for(ws.recv(), 5))
        assert error == {"type": "error", "code": "bad_message", "message": "expected a binary MessagePack frame"}


async def test_slow_consumer_is_bounded_and_does_not_delay_others(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    """A client that stops reading: its node holds at most its bound for it and others keep up; reading again,
    it catches up from the channel's history, in order, without reloading the snapshot."""
    channel = f"trajectory:{team.trajectory_id}"
    ids = await insert_jobs(pool, team, 400)
    headers = {"Authorization": f"Bearer {team.token}"}
    # The slow client: a tiny receive buffer and it never reads, so the node's bound is what holds.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)  # before connecting, so TCP's window follows it
    sock.connect(("127.0.0.1", stack.nodes[0].port))
    sock.setblocking(False)
    # Uncompressed: deflated, these deltas (their error a run of one letter) are so small that the kernel's
    # buffers would hold them all and the node's bound would never be reached.
    slow = await websockets.connect(
        stack.nodes[0].ws, sock=sock, additional_headers=headers, max_queue=1, compression=None
    )
    slow.transport.pause_reading()
    await slow.send(json.dumps({"type": "subscribe", "channel": channel}))
    try:
        async with Follower(stack.nodes[0].ws, team.token) as fast:
            await fast.subscribe(channel)
            await fast.wait_for(lambda f: len(f.listed(channel)) == 400)
            for round_ in range(12):  # 12 x 400 job deltas of ~2 KB: far past the 2 MiB bound
                status = "running" if round_ % 2 == 0 else "queued"
                await pool.execute(
                    "update jobs set status = $2, error = repeat('x', 2000) where id = any($1::bigint[])", ids, status
                )
                await fast.wait_for(
                    lambda f: all(j["status"] == status for j in f.listed(channel).values()),  # noqa: B023
                    timeout=10,
                )
            assert fast.problems == []
        async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
            metrics = (await client.get("/metrics")).text
        assert "gateway_catch_ups_total 1.0" in metrics  # it fell behind: its channel waits for the history
    finally:
        slow.transport.resume_reading()
    # The slow one, reading again, gets everything it missed in order (the channel's history), and no resync.
    final = {
        r["id"]: (r["version"], r["status"])
        for r in await pool.fetch("select id, version, status from jobs where id = any($1::bigint[])", ids)
    }
    jobs: dict[int, tuple[int, str]] = {}
    kinds: list[str] = []
    seqs: list[int] = []
    try:
        while jobs != final:
            m = json.loads(await asyncio.wait_for(slow.recv(), 10))
            kinds.append(m["type"])
            if m["type"] == "batch":
                seqs.append(m["seq"])
            for j in m.get("jobs", ()):
                if j["id"] in ids and j["version"] > jobs.get(j["id"], (0, ""))[0]:
                    jobs[j["id"]] = (j["version"], j["status"])
    finally:
        await slow.close()
    first_batch = kinds.index("batch")
    assert (
        "resync" not in kinds and set(kinds[:first_batch]) == {"snapshot"} and "snapshot" not in kinds[first_batch:]
    ), kinds[:20]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # contiguous: nothing lost on the way


async def test_big_trajectory_snapshot_is_paged_and_never_trips_the_slow_consumer_bound(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    channel = f"trajectory:{team.trajectory_id}"
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, timestep, error)"
        " select $1, $2, $3, 'analysis', 'Polyhedral Template Matching', f, f * 0.5, case when f % 7 = 0 then repeat('e', 300) end"
        " from generate_series(0, 39999) f",
        team.id,
        team.trajectory_id,
        team.cluster_id,
    )
    async with Follower(stack.nodes[1].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=60)
        pages = [m for m in f.messages if m["type"] == "snapshot"]
        assert [p["page"] for p in pages] == list(range(len(pages))) and pages[-1]["final"]
        assert len(f.listed(channel)) == 40_000
        assert f.channels[channel].resyncs == 0 and f.problems == []
        some = next(iter(f.listed(channel)))
        await pool.execute("update jobs set status = 'running' where id = $1", some)
        await f.wait_for(lambda f: f.listed(channel)[some]["status"] == "running")
