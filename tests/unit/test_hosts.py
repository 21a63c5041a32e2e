"""Host names and origins (against DNS rebinding): which Host a node answers for, and which Origin is its own."""

from __future__ import annotations

import pytest

from gateway.config import DEFAULT_HOSTS, ConfigError, Settings
from gateway.web.http.hosts import host_allowed, loopback_host, same_origin, split_host


@pytest.mark.parametrize(
    ("header", "parsed"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        ("LocalHost", ("localhost", None)),
        ("[::1]:8765", ("[::1]", 8765)),
        ("[::1]", ("[::1]", None)),
        ("jobs.example.org:443", ("jobs.example.org", 443)),
        ("", None),
        (":8765", None),
        ("evil.example:0", None),
        ("evil.example:99999", None),
        ("evil.example:８７", None),  # full-width digits are not a port
        ("[::1", None),
        ("[::1]x", None),
        ("user@evil.example", None),
        ("evil.example/path", None),
    ],
)
def test_a_host_header_splits_into_name_and_port(header: str, parsed: object) -> None:
    assert split_host(header) == parsed


def test_only_the_names_given_are_answered_for() -> None:
    assert host_allowed("127.0.0.1:8765", DEFAULT_HOSTS) and host_allowed("localhost:1", DEFAULT_HOSTS)
    assert host_allowed("[::1]:8765", DEFAULT_HOSTS)
    for rebinding in ("evil.example:8765", "127.0.0.1.evil.example:8765", "", "localhost.:8765"):
        assert not host_allowed(rebinding, DEFAULT_HOSTS), rebinding
    assert host_allowed("evil.example", ("*",))
    assert loopback_host("127.0.0.1:9100") and not loopback_host("evil.example:9100")


@pytest.mark.parametrize(
    ("origin", "scheme", "host", "same"),
    [
        ("http://127.0.0.1:8765", "http", "127.0.0.1:8765", True),
        ("http://127.0.0.1:8765", "ws", "127.0.0.1:8765", True),
        ("https://jobs.example.org", "wss", "jobs.example.org", True),
        ("https://jobs.example.org:443", "https", "jobs.example.org", True),  # the default port, spelt out
        ("http://JOBS.example.org", "http", "jobs.example.org:80", True),
        ("https://127.0.0.1:8765", "http", "127.0.0.1:8765", False),  # another scheme is another origin
        ("ftp://127.0.0.1:8765", "http", "127.0.0.1:8765", False),
        ("http://127.0.0.1:8766", "http", "127.0.0.1:8765", False),
        ("http://127.0.0.1", "http", "127.0.0.1:8765", False),
        ("http://evil.example:8765", "http", "127.0.0.1:8765", False),
        ("null", "http", "127.0.0.1:8765", False),
        ("http://user@127.0.0.1:8765", "http", "127.0.0.1:8765", False),
    ],
)
def test_an_origin_is_ours_only_with_our_scheme_host_and_port(origin: str, scheme: str, host: str, same: bool) -> None:
    assert same_origin(origin, scheme, host) is same


def test_gateway_hosts_takes_names_and_refuses_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_HOSTS", " Jobs.Example.org:443 , jobs-internal ")
    assert Settings().hosts == ("jobs.example.org", "jobs-internal")
    monkeypatch.setenv("GATEWAY_HOSTS", "")
    assert Settings().hosts == DEFAULT_HOSTS
    monkeypatch.setenv("GATEWAY_HOSTS", "https://jobs.example.org")
    with pytest.raises(ConfigError, match="GATEWAY_HOSTS"):
        Settings()
