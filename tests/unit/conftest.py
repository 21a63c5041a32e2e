"""Fixtures of the unit tests that need PostgreSQL (the relay's: its outbox, wake-up flag and sweeps)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import create_database, drop_database


@pytest.fixture(scope="module")
def url(pg_admin: str) -> Iterator[str]:
    """A database of the test module's own: its outbox is read from the start, and its wake-up flag, the jobs a
    sweep changes, the relays counted and the locks held are that module's alone."""
    database_url = create_database(pg_admin)
    try:
        yield database_url
    finally:
        drop_database(pg_admin, database_url)
