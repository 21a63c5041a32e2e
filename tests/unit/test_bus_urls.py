"""REDIS_URL's forms (gateway.bus.urls): a server's URL is left to redis-py, a Sentinel URL is read here, and a URL
that cannot work is refused with a message naming what is wrong (never the password)."""

from __future__ import annotations

import pytest

from gateway.bus.urls import Sentinels, parse
from gateway.config import ConfigError


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/0", "rediss://user:pw@redis.example.org:6380", "unix:///run/redis.sock?db=2"]
)
def test_a_server_s_url_is_left_to_redis_py(url: str) -> None:
    assert parse(url) is None


def test_a_sentinel_url_names_every_sentinel_the_service_and_the_credentials() -> None:
    url = "redis+sentinel://app:s%40cret@10.0.0.1:26380,sentinel-b,[::1]:26381/jobs?db=3&sentinel_password=watch"
    assert parse(url) == Sentinels(
        hosts=(("10.0.0.1", 26380), ("sentinel-b", 26379), ("::1", 26381)),
        service="jobs",
        db=3,
        username="app",
        password="s@cret",
        sentinel_password="watch",
    )


def test_a_password_alone_logs_in_as_the_default_user() -> None:
    sentinels = parse("redis+sentinel://:pw@h:26379/mymaster")
    assert sentinels is not None and (sentinels.username, sentinels.password, sentinels.db) == (None, "pw", 0)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:6379", "expected a URL starting redis://, rediss://, unix:// or redis+sentinel://"),
        ("127.0.0.1:6379", "expected a URL starting"),
        ("redis://127.0.0.1:port/0", "the port is not a number"),
        ("redis+sentinel://h1:26379,h2:26379", "name the monitored service"),
        ("redis+sentinel://h1:26379/", "name the monitored service"),
        ("redis+sentinel://h1:26379/mymaster/0", "with no '/' in it (a database number goes in ?db=)"),
        ("redis+sentinel://h1:x/mymaster", "a port is not a number from 1 to 65535"),
        ("redis+sentinel://h1:0/mymaster", "a port is not a number from 1 to 65535"),
        ("redis+sentinel://h1,,h2/mymaster", "a sentinel's host is missing"),
        ("redis+sentinel:///mymaster", "a sentinel's host is missing"),
        ("redis+sentinel://[::1/mymaster", "an IPv6 host is written [address]:port"),
        ("redis+sentinel://h1/mymaster?db=one", "db is not a database number"),
        ("redis+sentinel://h1/mymaster?socket_timeout=1", "an unknown option after ? (known: db,"),
        ("redis://:pa/ss@h1:6379/0", "credentials do not end at one '@' before the host"),
        ("redis://:pa@ss@h1:6379/0", "credentials do not end at one '@' before the host"),
        ("redis+sentinel://:pa?ss@h1/mymaster", "credentials do not end at one '@' before the host"),
        ("unix://:pa#ss@/run/redis.sock", "it holds a '#'"),
        ("redis+sentinel://h1/mymaster?db", "not name=value pairs"),
        ("rediss+sentinel://h1/mymaster", "TLS to the sentinels (rediss+sentinel://) is not supported"),
    ],
)
def test_a_url_no_client_could_use_is_refused_saying_why(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse(url)
    assert str(refused.value).startswith("REDIS_URL: ") and says in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://app:topsecret@h1:bad/mymaster",
        "redis+sentinel://app:top/secret@h1/mymaster",
        "redis+sentinel://app:top:secret/x@h1/mymaster",
        "redis+sentinel://h1/mymaster?sentinel_password=top&secret",
        "redis+sentinel://h1/top/secret",
        "redis://app:top/secret@h1:6379/0",
    ],
)
def test_the_refusal_never_shows_a_piece_of_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse(url)
    assert "top" not in str(refused.value) and "secret" not in str(refused.value)


def test_sentinels_with_a_redis_cluster_are_refused() -> None:
    with pytest.raises(ConfigError, match="unset GATEWAY_REDIS_CLUSTER"):
        parse("redis+sentinel://h1/mymaster", cluster=True)
