"""What operators read: /metrics (a node's and the relay's own), /healthz, /readyz; and that every metric the
rules and dashboard under deploy/ name is one they export.

The relay-metrics tests read the shared stack's relay, which serves its metrics endpoint
(GATEWAY_RELAY_METRICS_PORT), beside its two nodes; the demo's in-process relay and two relays sharing partitions
run worlds of their own.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gateway.embedded import EmbeddedValkey, free_port
from harness.follower import Follower
from tests.conftest import Process, Stack, create_database, drop_database, spawn, wait_http
from tests.deploy_files import shipped_metric_names
from tests.integration.conftest import Team, insert_jobs, make_team

# Every label the exposition may carry: each has few values (partitions are GATEWAY_PARTITIONS; python_info's
# and gateway_build_info's describe the interpreter and the build). A label per connection, user, channel or
# transaction would grow without bound.
BOUNDED_LABELS = {
    *("partition", "le", "implementation", "major", "minor", "patchlevel", "version", "python", "commit"),
    "generation",  # the garbage collector's 0, 1 or 2
    *("route", "method", "status"),  # a route template (or "other"), a usual HTTP method (or "other"), "2xx"
    "database",  # a database of the PostgreSQL server, only while a transaction in it holds a relay back
    "kind",  # a channel's kind: team, team-jobs, trajectory or cluster
}
# What a node exports of the relays, read from their heartbeats in Redis (what /readyz judges).
NODE_VIEW_OF_RELAYS = {"gateway_relay_heartbeat_age_seconds", "gateway_relay_alive"}
HISTOGRAMS = {"node": "gateway_publish_to_write_seconds", "relay": "gateway_relay_commit_to_publish_seconds"}


def value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def promtool_check(text: str) -> None:
    """`promtool check metrics` on the exposition: it parses it and lints names, units, help and types."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("GATEWAY_REQUIRE_PROMTOOL") == "1":
            pytest.fail("GATEWAY_REQUIRE_PROMTOOL=1 but promtool is not installed (Debian: the prometheus package)")
        pytest.skip("promtool is not installed")
    checked = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()


async def scrape(url: str, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.get(url, headers=headers)


async def test_node_metrics_count_connections_frames_and_the_relays_heartbeat(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(f"trajectory:{team.trajectory_id}")
        await f.wait_for(lambda f: f.channels[f"trajectory:{team.trajectory_id}"].snapshot_done)
        # The node's figures since it started hold the session's other tests too: this change's lag is the step.
        before = (await scrape(f"{stack.nodes[0].http}/metrics")).text
        (job_id,) = await insert_jobs(pool, team, 1)
        await f.wait_for(lambda f: job_id in f.listed(f"trajectory:{team.trajectory_id}"))
        text = (await scrape(f"{stack.nodes[0].http}/metrics")).text
    assert value(text, "gateway_connections") >= 1
    assert value(text, "gateway_subscriptions") >= 1
    assert value(text, "gateway_sent_frames_total") >= 2  # the snapshot and the batch at least
    assert value(text, "gateway_sent_bytes_total") > 0
    assert value(text, "gateway_publish_to_write_seconds_count") >= 1  # the batch, written as it arrived
    # Its change's commit to its frame written, on the trajectory's kind of channel: how fresh subscribers are.
    lag_count, lag_sum = (
        'gateway_delivery_lag_seconds_count{kind="trajectory"}',
        'gateway_delivery_lag_seconds_sum{kind="trajectory"}',
    )
    assert value(text, lag_count) >= 1 + (value(before, lag_count) if lag_count in before else 0)
    assert 0 < value(text, lag_sum) - (value(before, lag_sum) if lag_sum in before else 0) < 30
    assert value(text, 'gateway_relay_heartbeat_age_seconds{partition="0"}') < 5
    assert value(text, 'gateway_relay_alive{partition="0"}') == 1
    assert value(text, "gateway_redis_up") == 1
    assert value(text, "process_resident_memory_bytes") > 0
    # The handshake's admission and the event loop it follows (an idle stack: nobody refused).
    assert value(text, "gateway_event_loop_lag_seconds_count") >= 1
    assert value(text, "gateway_admission_rate") > 0
    assert value(text, "gateway_handshakes_refused_total") == 0
    assert value(text, 'gateway_gc_pause_seconds_count{generation="0"}') >= 1  # the collector's passes, timed
    requests = {
        (s.labels["route"], s.labels["method"], s.labels["status"]): s.value
        for s in samples(text)
        if s.name == "gateway_http_requests_total"
    }
    assert requests[("/ws", "GET", "1xx")] >= 1  # the follower's handshake
    assert requests[("/healthz", "GET", "2xx")] >= 1  # the stack's start waited on it
    # The relay's own figures are the relay's to export: a node re-exporting them made sum() count them twice.
    # (its own view of them, from the heartbeats in Redis, is NODE_VIEW_OF_RELAYS)
    exported = {s.name for s in samples(text)}
    assert not {n for n in exported if n.startswith("gateway_relay_")} - NODE_VIEW_OF_RELAYS


async def test_node_metrics_pass_promtool(stack: Stack) -> None:
    promtool_check((await scrape(f"{stack.nodes[1].http}/metrics")).text)


async def test_health_and_readiness(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:
        assert (await client.get("/healthz")).json()["ok"] is True
        ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"ready": True, "problems": []}


@dataclass
class Observed:
    """A relay that serves its own /metrics, and two nodes."""

    database_url: str
    secret: str
    relay: Process
    relay_metrics: str
    nodes: list[Process]


@pytest.fixture(scope="module")
def observed(stack: Stack) -> Observed:
    """The stack's relay, with its metrics endpoint, and its two nodes."""
    return Observed(stack.database_url, stack.secret, stack.relay, stack.relay_metrics, stack.nodes)


@pytest.fixture
def observed_pool(pool: asyncpg.Pool) -> asyncpg.Pool:
    return pool


async def _relay_text(observed: Observed, timeout: float = 20.0) -> str:
    """The relay's /metrics once it serves partition 0."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            text = (await scrape(observed.relay_metrics)).text
            if 'gateway_relay_epoch{partition="0"}' in text:
                return text
        except httpx.TransportError:
            pass
        if asyncio.get_running_loop().time() > deadline or observed.relay.proc.poll() is not None:
            raise AssertionError(f"the relay serves no metrics:\n{observed.relay.output()[-2000:]}")
        await asyncio.sleep(0.1)


async def _published_through(observed: Observed, pool: asyncpg.Pool) -> None:
    """A change committed, published by the relay and written by node 0 to a subscriber."""
    team = await make_team(pool, observed.secret)
    await _relay_text(observed)
    async with Follower(observed.nodes[0].ws, team.token) as f:
        channel = f"trajectory:{team.trajectory_id}"
        await f.subscribe(channel)
        await f.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=20)
        (job_id,) = await insert_jobs(pool, team, 1)
        await f.wait_for(lambda f: job_id in f.listed(channel), timeout=20)


async def test_the_relay_exports_its_own_metrics_once(observed: Observed, observed_pool: asyncpg.Pool) -> None:
    await _published_through(observed, observed_pool)
    relay = await _relay_text(observed)
    nodes = [(await scrape(f"{n.http}/metrics")).text for n in observed.nodes]
    relay_names = {s.name for s in samples(relay) if s.name.startswith("gateway_relay_")}
    assert {
        "gateway_relay_epoch",
        "gateway_relay_lag_seconds",
        "gateway_relay_held_back_seconds",
        "gateway_relay_changes_total",
        "gateway_relay_deltas_total",
        "gateway_relay_published_messages_total",
        "gateway_relay_cycles_total",
        "gateway_relay_outbox_reads_total",
        "gateway_relay_active_partitions",
        "gateway_relay_commit_to_publish_seconds_count",
    } <= relay_names
    for name in relay_names:  # each relay series exactly once across the relay and both nodes
        everywhere = [s for text in (relay, *nodes) for s in samples(text) if s.name == name]
        assert len({tuple(sorted(s.labels.items())) for s in everywhere}) == len(everywhere), name
        assert all(s.name != name for text in nodes for s in samples(text)), name
    assert value(relay, 'gateway_relay_changes_total{partition="0"}') >= 1
    assert (
        value(relay, 'gateway_relay_cycles_total{partition="0"}')
        >= value(relay, 'gateway_relay_outbox_reads_total{partition="0"}')
        >= 1
    )
    assert value(relay, "gateway_relay_active_partitions") == 1
    assert value(relay, "gateway_redis_up") == 1


async def test_metrics_carry_histograms_process_figures_and_only_bounded_labels(
    observed: Observed, observed_pool: asyncpg.Pool
) -> None:
    await _published_through(observed, observed_pool)
    expositions = {
        "node": (await scrape(f"{observed.nodes[0].http}/metrics")).text,
        "relay": await _relay_text(observed),
    }
    for who, text in expositions.items():
        found = samples(text)
        names = {s.name for s in found}
        histogram = HISTOGRAMS[who]
        buckets = [s for s in found if s.name == f"{histogram}_bucket"]
        assert len({s.labels["le"] for s in buckets}) > 5 and any(s.labels["le"] == "+Inf" for s in buckets), who
        assert max(s.value for s in found if s.name == f"{histogram}_count") >= 1, who
        assert {
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
            "python_info",
            "gateway_build_info",
        } <= names, who
        labels = {label for s in found for label in s.labels}
        assert labels <= BOUNDED_LABELS, (who, labels - BOUNDED_LABELS)  # no pid, xid, connection or user
        routes = {s.labels["route"] for s in found if "route" in s.labels}
        assert not [r for r in routes if any(c.isdigit() for c in r)], routes  # templates, never an id
        promtool_check(text)


async def test_every_metric_the_deploy_files_name_is_one_a_node_or_relay_exports(
    observed: Observed, observed_pool: asyncpg.Pool
) -> None:
    await _published_through(observed, observed_pool)  # a websocket, a change published, HTTP requests
    exported = {s.name for s in samples(await _relay_text(observed))}
    for node in observed.nodes:
        exported |= {s.name for s in samples((await scrape(f"{node.http}/metrics")).text)}
    shipped = shipped_metric_names()
    assert {"gateway_http_requests_total", "gateway_relay_lag_seconds", "gateway_build_info"} <= shipped
    assert shipped <= exported, f"deploy/ names metrics nobody exports: {sorted(shipped - exported)}"


async def test_the_relays_endpoint_is_for_this_host_only_without_a_token(observed: Observed) -> None:
    await _relay_text(observed)
    forwarded = await scrape(observed.relay_metrics, **{"X-Forwarded-For": "203.0.113.7"})
    assert forwarded.status_code == 403 and forwarded.json()["error"] == "forbidden"


@pytest.fixture
def demo(pg_admin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """`gateway demo` on a fresh database and a private Valkey: its relay runs inside the web process."""
    database_url = create_database(pg_admin)
    valkey = EmbeddedValkey(tmp_path_factory.mktemp("valkey-demo"))
    valkey.start()
    data = tmp_path_factory.mktemp("demo-data")
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0"}
    env.pop("GATEWAY_SECRET", None)
    port = free_port()
    process = spawn("demo", ["demo", "--port", str(port), "--data", str(data)], env, data, port)
    try:
        wait_http(process)
        yield process
    finally:
        process.stop()
        valkey.stop()
        drop_database(pg_admin, database_url)


async def test_the_demo_exports_its_in_process_relay_once(demo: Process) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while 'gateway_relay_epoch{partition="0"}' not in (text := (await scrape(f"{demo.http}/metrics")).text):
        assert asyncio.get_running_loop().time() < deadline, text
        await asyncio.sleep(0.2)
    found = samples(text)
    series = [(s.name, tuple(sorted(s.labels.items()))) for s in found]
    assert len(series) == len(set(series))  # every series once: the node's, the relay's and the process's
    names = {s.name for s in found}
    assert {
        "gateway_connections",
        "gateway_relay_epoch",
        "gateway_relay_commit_to_publish_seconds_count",
        "process_cpu_seconds_total",
    } <= names
    promtool_check(text)


@pytest.fixture
def two_relays(pg_admin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[Process, str]]]:
    """Two relay processes sharing two partitions, each with its metrics endpoint (no nodes)."""
    database_url = create_database(pg_admin)
    valkey = EmbeddedValkey(tmp_path_factory.mktemp("valkey-relays"))
    valkey.start()
    logdir = tmp_path_factory.mktemp("relays-logs")
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "GATEWAY_PARTITIONS": "2",
    }
    relays = []
    for name in ("relay-a", "relay-b"):
        port = free_port()
        relays.append(
            (
                spawn(name, ["relay"], {**env, "GATEWAY_RELAY_METRICS_PORT": str(port)}, logdir),
                f"http://127.0.0.1:{port}/metrics",
            )
        )
    try:
        yield relays
    finally:
        for relay, _ in relays:
            relay.stop()
        valkey.stop()
        drop_database(pg_admin, database_url)


def test_relays_sharing_partitions_export_each_partition_once(two_relays: list[tuple[Process, str]]) -> None:
    deadline = time.monotonic() + 60
    while True:
        texts = []
        for _relay, url in two_relays:
            try:
                texts.append(httpx.get(url).text)
            except httpx.TransportError:
                texts.append("")
        epochs = [s.labels["partition"] for text in texts for s in samples(text) if s.name == "gateway_relay_epoch"]
        if sorted(epochs) == ["0", "1"] and all("gateway_relay_active_partitions 1.0" in text for text in texts):
            # Each serves one, and exports only its own: a sum() over relays counts each partition once.
            changes = [
                s.labels["partition"]
                for text in texts
                for s in samples(text)
                if s.name == "gateway_relay_changes_total"
            ]
            assert sorted(changes) == ["0", "1"], texts
            break
        assert time.monotonic() < deadline, (texts, [r.output()[-1000:] for r, _ in two_relays])
        time.sleep(0.2)


async def test_subscribers_at_one_position_are_sent_one_snapshot_read_and_framed_once(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """A connect storm's subscribers arriving one after another at a quiet channel share its snapshot."""
    await insert_jobs(pool, team, 50)
    channel = f"trajectory:{team.trajectory_id}"
    node = stack.nodes[1]
    async with Follower(node.ws, team.token) as first:
        await first.subscribe(channel)
        await first.wait_for(lambda f: f.channels[channel].snapshot_done and len(f.listed(channel)) == 50)
    before = await reused(node)
    for _ in range(3):
        async with Follower(node.ws, team.token) as later:
            await later.subscribe(channel)
            await later.wait_for(lambda f: f.channels[channel].snapshot_done)
            assert len(later.listed(channel)) == 50
    assert await reused(node) >= before + 1  # at least one of them within the snapshot's second


async def reused(node: Process) -> float:
    async with httpx.AsyncClient(base_url=node.http) as client:
        text = (await client.get("/metrics")).text
    return float(
        next(line.split()[1] for line in text.splitlines() if line.startswith("gateway_snapshots_reused_total "))
    )


async def test_a_transaction_open_in_another_database_is_named_by_the_relay_and_by_check(
    observed: Observed, observed_pool: asyncpg.Pool, pg_admin: str
) -> None:
    """pg_snapshot_xmin counts every database of the server: another application's open transaction held a
    production relay back, and only a log line without the database's name said so."""
    await _relay_text(observed)
    team = await make_team(observed_pool, observed.secret)
    elsewhere = await asyncio.to_thread(create_database, pg_admin, False)
    name = urlsplit(elsewhere).path.lstrip("/")  # an embedded server's URL names its socket's folder after it
    other = await asyncpg.connect(elsewhere)
    try:
        async with Follower(observed.nodes[0].ws, team.token) as f:
            channel = f"trajectory:{team.trajectory_id}"
            await f.subscribe(channel)
            await f.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=20)
            held = other.transaction()
            await held.start()
            pid = await other.fetchval("select pg_backend_pid()")
            await other.fetchval("select pg_current_xact_id()")  # an xid: the server's horizon stops here
            (job_id,) = await insert_jobs(observed_pool, team, 1)
            deadline = time.monotonic() + 30
            while True:
                text = (await scrape(observed.relay_metrics)).text
                labels = f'{{database="{name}",partition="0"}}'
                if f"gateway_relay_holder_pid{labels}" in text:
                    break
                assert time.monotonic() < deadline, "the relay's metrics never named the other database"
                await asyncio.sleep(0.2)
            assert value(text, f"gateway_relay_holder_pid{labels}") == pid
            assert value(text, f"gateway_relay_holder_transaction_seconds{labels}") > 0
            assert value(text, 'gateway_relay_held_back_seconds{partition="0"}') > 0
            assert job_id not in f.listed(channel)  # held back indeed
            assert f"pid={pid} in database {name} (another database on this server" in observed.relay.output()
            checked = await asyncio.to_thread(
                check_until_warned, observed.database_url, observed.secret, f"database {name!r} (pid {pid})"
            )
            assert checked.returncode == 2  # REDIS_URL unset is its problem; the warning changes no status
            await held.rollback()
            await f.wait_for(lambda f: job_id in f.listed(channel), timeout=30)
            text = (await scrape(observed.relay_metrics)).text
            assert "gateway_relay_holder_pid{" not in text  # gone with the transaction
    finally:
        await other.close()
        await asyncio.to_thread(drop_database, pg_admin, elsewhere)


def check_until_warned(database_url: str, secret: str, says: str) -> subprocess.CompletedProcess[str]:
    """`gateway check` until the transaction has been open long enough for its warning (5 s)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_") and k not in ("REDIS_URL",)}
    deadline = time.monotonic() + 60
    while True:
        done = subprocess.run(
            [sys.executable, "-m", "gateway", "check"],
            env={**keep, "DATABASE_URL": database_url, "GATEWAY_SECRET": secret},
            capture_output=True,
            text=True,
            timeout=120,
        )
        warned = [line for line in done.stdout.splitlines() if line.startswith("warning") and says in line]
        if warned:
            return done
        assert time.monotonic() < deadline, done.stdout + done.stderr
        time.sleep(1)
