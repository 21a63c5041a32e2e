"""One trace from a cluster's request to a browser's frame, across the real processes: a node and a relay
exporting by OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT) to a small receiver in the test, which decodes what they
send with opentelemetry-proto. (The SDK's in-memory exporter cannot see into other processes: the spans' links
and parents are checked with it in tests/unit/test_tracing.py.) A world of its own: the session's stack runs
untraced."""

from __future__ import annotations

import asyncio
import gzip
import os
import secrets
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import asyncpg
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from gateway.embedded import EmbeddedValkey, free_port
from harness.follower import Follower
from harness.world import World, spawn, wait_http
from tests.conftest import create_database, drop_database
from tests.integration.conftest import make_team

TRACE_ID = secrets.token_hex(16)
PARENT_ID = secrets.token_hex(8)


class Receiver:
    """An OTLP/HTTP trace endpoint: every span it is sent, as (service, name, trace id, span id, parent id,
    attributes)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, object]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.take(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
            )
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: a.value.string_value or a.value.int_value for a in span.attributes}
                    self.spans.append(
                        {
                            "service": service,
                            "name": span.name,
                            "trace": span.trace_id.hex(),
                            "id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "links": [link.span_id.hex() for link in span.links],
                            "attributes": attributes,
                        }
                    )

    def of_trace(self, trace_id: str) -> list[dict[str, object]]:
        return [s for s in list(self.spans) if s["trace"] == trace_id]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def traced_world(pg_admin: str, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    database_url = create_database(pg_admin)
    valkey = EmbeddedValkey(tmp_path_factory.mktemp("valkey-traced"))
    valkey.start()
    logdir = tmp_path_factory.mktemp("traced-logs")
    secret = secrets.token_urlsafe(32)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "GATEWAY_SECRET": secret,
        "GATEWAY_LOG_LEVEL": "INFO",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "200",  # milliseconds: the spans reach the receiver soon after they end
    }
    port = free_port()
    node = spawn("tnode", ["serve", "--port", str(port)], {**env, "OTEL_SERVICE_NAME": "gateway-node"}, logdir, port)
    world = World(database_url, valkey, secret, env, logdir, [node])
    world.start_relay("trelay", OTEL_SERVICE_NAME="gateway-relay")
    try:
        wait_http(node)
        yield world
    finally:
        world.stop_relays()
        node.stop()
        valkey.stop()
        drop_database(pg_admin, database_url)


@pytest.fixture
async def tpool(traced_world: World) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(traced_world.database_url, min_size=1, max_size=2)
    yield pool
    await pool.close()


async def test_an_ingest_its_relay_publish_and_the_nodes_delivery_are_one_trace(
    traced_world: World, tpool: asyncpg.Pool, receiver: Receiver
) -> None:
    team = await make_team(tpool, traced_world.secret)
    node = traced_world.nodes[0]
    async with Follower(node.ws, team.token) as browser:
        await browser.subscribe(f"team:{team.id}")
        await browser.wait_for(lambda f: all(s.snapshot_done for s in f.channels.values()))
        job = {"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "Preprocess frame", "frame": 0}
        async with httpx.AsyncClient(base_url=node.http) as client:
            answer = await client.post(
                "/api/ingest/jobs",
                json={"jobs": [{**job, "status": "queued"}]},
                headers={
                    "Authorization": f"Bearer {team.cluster_key}",
                    "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01",
                },
            )
        assert answer.status_code == 200, answer.text

        def whole() -> bool:
            names = {s["name"] for s in receiver.of_trace(TRACE_ID)}
            return {"ingest jobs", "relay publish", "node deliver"} <= names

        deadline = asyncio.get_running_loop().time() + 60
        while not whole() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
    spans = receiver.of_trace(TRACE_ID)
    assert whole(), spans
    (ingest,) = [s for s in spans if s["name"] == "ingest jobs"]
    publishes = [s for s in spans if s["name"] == "relay publish"]
    deliveries = [s for s in spans if s["name"] == "node deliver"]
    assert ingest["service"] == "gateway-node" and ingest["parent"] == PARENT_ID
    assert ingest["attributes"] == {
        "gateway.team_id": team.id,
        "gateway.cluster_id": team.cluster_id,
        "gateway.jobs": 1,
    }
    for publish in publishes:
        assert publish["service"] == "gateway-relay"
        assert publish["parent"] == ingest["id"] and ingest["id"] in publish["links"]
    assert {d["parent"] for d in deliveries} <= {p["id"] for p in publishes}
    team_delivery = [d for d in deliveries if d["attributes"]["gateway.channel"] == f"team:{team.id}"]
    assert team_delivery and team_delivery[0]["attributes"]["gateway.connections"] == 1
    assert team_delivery[0]["attributes"]["gateway.team_id"] == team.id
    # The outbox row carried the ingest span's context from the request's transaction to the relay.
    (created,) = answer.json()["jobs"]
    carried = await tpool.fetchval(
        "select trace_context from job_changes where entity = 'job' and job_id = $1", created["id"]
    )
    assert carried == f"00-{TRACE_ID}-{ingest['id']}-01"


async def test_a_change_whose_team_summary_waits_for_its_interval_reaches_the_team_in_its_trace(
    traced_world: World, tpool: asyncpg.Pool, receiver: Receiver
) -> None:
    """A team's summary goes out at most twice a second. A change read just after one went out is published at
    once on its job's channels, and in the team's summary half a second later: that later publish carried no
    trace (the relay forgot the change's trace with the first publish), so a browser following the team, as the
    Jobs view does, had no delivery in the request's trace (a whole suite, 2026-12-07)."""
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    team = await make_team(tpool, traced_world.secret)
    node = traced_world.nodes[0]
    job = {"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "Preprocess frame", "status": "queued"}
    key = {"Authorization": f"Bearer {team.cluster_key}"}
    async with Follower(node.ws, team.token) as browser, httpx.AsyncClient(base_url=node.http) as client:
        await browser.subscribe(f"team:{team.id}")
        await browser.wait_for(lambda f: all(s.snapshot_done for s in f.channels.values()))
        first = await client.post("/api/ingest/jobs", json={"jobs": [{**job, "frame": 0}]}, headers=key)
        assert first.status_code == 200, first.text
        team_channel = browser.channels[f"team:{team.id}"]
        await browser.wait_for(lambda f: (team_channel.counts or {}).get("queued") == 1)  # its summary just went out
        second = await client.post(
            "/api/ingest/jobs",
            json={"jobs": [{**job, "frame": 1}]},
            headers={**key, "traceparent": f"00-{trace_id}-{parent_id}-01"},
        )
        assert second.status_code == 200, second.text
        await browser.wait_for(lambda f: (team_channel.counts or {}).get("queued") == 2)

        def delivered_to_the_team() -> list[dict[str, object]]:
            return [
                s
                for s in receiver.of_trace(trace_id)
                if s["name"] == "node deliver" and s["attributes"]["gateway.channel"] == f"team:{team.id}"
            ]

        deadline = asyncio.get_running_loop().time() + 30
        while not delivered_to_the_team() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
    assert delivered_to_the_team(), receiver.of_trace(trace_id)
