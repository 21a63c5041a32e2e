"""A snapshot's pages of jobs, encoded once for every subscriber that shares their read, leave no cycle behind: a
node freezes what outlives its collector's younger passes, and frozen cyclic garbage waits for the next thaw
(gateway.web.node.garbage). `bench.memory_back` grew 2 MiB a wave of 1,000 clients with a page that held itself."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gateway.core.batching import MAX_BATCH_BYTES
from gateway.core.model import Job
from gateway.core.protocol import Snapshot
from gateway.hub.snapshots import Encoded, Page


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def jobs(n: int, error: str | None = None) -> list[Job]:
    return [
        Job(id=i, team_id=1, trajectory_id=1, cluster_id=1, kind="analysis", name=f"Frame {i}", status="failed",
            version=1, frame=i, error=error)
        for i in range(1, n + 1)
    ]  # fmt: skip


@pytest.mark.parametrize("error", [None, "x" * 4000], ids=["one part", "halved"])
def test_a_page_of_jobs_goes_with_its_last_reference(no_collector: None, error: str | None) -> None:
    read = Encoded(jobs(500, error))
    parts = read.parts()
    assert (len(parts) == 1) == (error is None)
    assert all(len(part.raw("json")) <= MAX_BATCH_BYTES for part in parts)
    pages = [
        Page(Snapshot(channel="trajectory:1", seq=3, cursor="1-3", time=0, page=i, final=False), part)
        for i, part in enumerate(parts)
    ]
    assert all(page.frame("json") and page.frame("msgpack") for page in pages)
    del read, parts, pages
    assert gc.collect() == 0  # nothing left for the collector: reference counting freed it all
