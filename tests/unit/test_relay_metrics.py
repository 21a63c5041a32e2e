"""The relay's own /metrics: what a partition it serves exports, who may scrape the endpoint, whether Redis
answers; and what a node exports of the relays it sees in Redis."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.bus.relay_stats import RelayStats
from gateway.core.batching import Batcher
from gateway.embedded import free_port
from gateway.exposition import REDIS_WITHIN, exposition
from gateway.relay.metrics import Endpoint, Exporter, PartitionFigures, RelayCollector
from gateway.store.joint_reads import JointReads
from gateway.web.node.metrics import relay_families


def _series(
    figures: dict[int, PartitionFigures], joint: JointReads | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = exposition([RelayCollector(figures, joint)]).body.decode()  # type: ignore[union-attr]
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples if s.name.startswith("gateway_relay_")
    }  # fmt: skip


def test_a_served_partition_exports_its_epoch_counts_and_latency() -> None:
    figures = PartitionFigures()
    core = Batcher(7)
    figures.serving(core)
    core.changes_applied, core.deltas_taken = 10, 4
    figures.published = 3
    figures.cycles, figures.reads = 5, 3
    figures.commit_to_publish.observe(0.02)
    series = _series({0: figures})
    p = (("partition", "0"),)
    assert series[("gateway_relay_active_partitions", ())] == 1
    assert series[("gateway_relay_epoch", p)] == 7
    assert (series[("gateway_relay_changes_total", p)], series[("gateway_relay_deltas_total", p)]) == (10, 4)
    assert series[("gateway_relay_coalescing_ratio", p)] == 2.5
    assert series[("gateway_relay_published_messages_total", p)] == 3
    assert (series[("gateway_relay_cycles_total", p)], series[("gateway_relay_outbox_reads_total", p)]) == (5, 3)
    assert series[("gateway_relay_commit_to_publish_seconds_bucket", (("le", "0.025"), ("partition", "0")))] == 1
    assert series[("gateway_relay_commit_to_publish_seconds_count", p)] == 1


def test_a_process_of_several_partitions_exports_how_many_reads_went_together() -> None:
    joint = JointReads("postgresql://unused", 4)  # connects on its first joint read only
    joint.statements, joint.answered = 2, 7
    series = _series({}, joint)
    assert (
        series[("gateway_relay_joint_reads_total", ())],
        series[("gateway_relay_joint_read_partitions_total", ())],
    ) == (2, 7)
    assert not any(name.startswith("gateway_relay_joint") for name, _ in _series({}))  # one partition: none


def test_a_partition_handed_over_is_not_exported_and_its_counts_resume_if_it_comes_back() -> None:
    figures = PartitionFigures()
    first = Batcher(7)
    figures.serving(first)
    first.changes_applied = 10
    figures.stopped()
    assert _series({0: figures}) == {("gateway_relay_active_partitions", ()): 0}  # another relay exports it now
    second = Batcher(9)
    figures.serving(second)
    second.changes_applied = 1
    assert (
        _series({0: figures})[("gateway_relay_changes_total", (("partition", "0"),))] == 11
    )  # a counter never goes back


async def test_the_endpoint_wants_the_token_when_one_is_set() -> None:
    port = free_port()
    exporter = Exporter(Endpoint(port, token="scrape-me-0123456789"), RelayCollector({}))
    await exporter.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            refused = await client.get("/metrics")
            scraped = await client.get("/metrics", headers={"Authorization": "Bearer scrape-me-0123456789"})
    finally:
        await exporter.stop()
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert (
        scraped.status_code == 200
        and "gateway_relay_active_partitions 0.0" in scraped.text
        and "process_cpu_seconds_total" in scraped.text
    )


async def test_a_port_in_use_is_logged_and_the_relay_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        exporter = Exporter(Endpoint(taken.getsockname()[1]), RelayCollector({}))
        with caplog.at_level(logging.ERROR, logger="gateway.relay.metrics"):
            await exporter.start()
        await exporter.stop()
    assert "relay metrics: cannot listen on 127.0.0.1:" in caplog.text


async def _scraped_redis_up(probe: Callable[[], Awaitable[object]]) -> str:
    port = free_port()
    exporter = Exporter(Endpoint(port), RelayCollector({}), probe=probe)
    await exporter.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            text = (await client.get("/metrics")).text
    finally:
        await exporter.stop()
    (line,) = [line for line in text.splitlines() if line.startswith("gateway_redis_up ")]
    return line


async def test_the_endpoint_says_whether_redis_answered_its_read() -> None:
    async def answers() -> object:
        return []

    async def refuses() -> object:
        raise ConnectionRefusedError

    async def hangs() -> object:
        await asyncio.Event().wait()
        return None

    assert await _scraped_redis_up(answers) == "gateway_redis_up 1.0"
    assert await _scraped_redis_up(refuses) == "gateway_redis_up 0.0"
    started = time.monotonic()
    assert await _scraped_redis_up(hangs) == "gateway_redis_up 0.0"  # a scrape answers all the same, in time
    assert time.monotonic() - started < REDIS_WITHIN + 5


def test_a_node_says_which_partitions_have_a_relay_reporting() -> None:
    now = 1_000_000.0
    fresh = RelayStats(3, now - 1, 0.0, 0, 0, 0, 0.0, 0, 0)
    stale = RelayStats(2, now - 20, 0.0, 0, 0, 0, 0.0, 0, 0)
    families = {m.name: m for m in relay_families([fresh, stale, None], now)}
    alive = {s.labels["partition"]: s.value for s in families["gateway_relay_alive"].samples}
    assert alive == {"0": 1, "1": 0, "2": 0}  # the third's heartbeat expired in Redis: none at all
    ages = {s.labels["partition"]: s.value for s in families["gateway_relay_heartbeat_age_seconds"].samples}
    assert ages == {"0": 1, "1": 20}
    assert families["gateway_redis_up"].samples[0].value == 1


def test_a_node_that_redis_did_not_answer_says_so_and_nothing_of_the_relays() -> None:
    families = {m.name: m for m in relay_families(None, 1_000_000.0)}
    assert list(families) == ["gateway_redis_up"] and families["gateway_redis_up"].samples[0].value == 0
