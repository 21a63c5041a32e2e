"""The benchmark's tests run the Node peers: without Node.js and npm they are skipped, unless
GATEWAY_REQUIRE_NODE=1 (CI sets it) makes that a failure."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.conftest import create_database, drop_database


@pytest.fixture(autouse=True)
def node_peers() -> None:
    if shutil.which("node") and shutil.which("npm"):
        return
    if os.environ.get("GATEWAY_REQUIRE_NODE") == "1":
        pytest.fail("Node.js and npm are required (GATEWAY_REQUIRE_NODE=1) for the benchmark's Node peers")
    pytest.skip("Node.js and npm are not installed: the benchmark's Node peers cannot run")


@pytest.fixture
def url(pg_admin: str) -> Iterator[str]:
    """A database of the test's own (the tap's writer and the notify trigger change every job of it)."""
    url = create_database(pg_admin)
    try:
        yield url
    finally:
        drop_database(pg_admin, url)
