"""DATABASE_URL's form (gateway.store.urls): what asyncpg reads as written passes; a URL it would misread or refuse
is a ConfigError naming the setting and what is wrong, quoting no piece of the URL."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError
from gateway.store.urls import check


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1:5432/jobs",
        "postgres://app:s%40c%2Fr%23t@db.example.org/jobs?sslmode=require",
        "postgresql://app:pw@[::1]:5433,db2:5432/jobs?target_session_attrs=read-write",
        "postgresql:///jobs?host=/var/run/postgresql",
        "POSTGRESQL://app:pa:ss@h/jobs",
    ],
)
def test_a_url_asyncpg_reads_as_written_passes(url: str) -> None:
    check(url)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://app:pw@h/jobs", "expected a URL starting postgresql:// or postgres://"),
        ("127.0.0.1:5432", "expected a URL starting postgresql://"),
        ("postgresql://app:top/secret@h/jobs", "credentials do not end at one '@' before the host"),
        ("postgresql://app:top@secret@h/jobs", "credentials do not end at one '@' before the host"),
        ("postgresql://app:top?secret@h/jobs", "credentials do not end at one '@' before the host"),
        ("postgresql://app:top#secret@h/jobs", "it holds a '#'"),
        ("postgresql://app:pw@h:99999/jobs", "a port is not a number from 1 to 65535"),
        ("postgresql://app:pw@h:5432,h2:x/jobs", "a port is not a number from 1 to 65535"),
        ("postgresql://app:pw@h:\u00b2/jobs", "a port is not a number from 1 to 65535"),
        ("postgresql://app:pw@[::1/jobs", "an IPv6 host is written [address]:port"),
        ("postgresql://app:pw@h/jobs?sslmode", "not name=value pairs"),
        ("postgresql://app:pw@h/jobs?sslmode=bogus", "sslmode is one of disable, allow, prefer, require"),
    ],
)
def test_a_url_asyncpg_would_misread_or_refuse_is_refused_saying_why(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check(url)
    message = str(refused.value)
    assert message.startswith("DATABASE_URL: ") and says in message, message
    assert "top" not in message and "secret" not in message
