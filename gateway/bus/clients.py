"""Every Redis client the gateway opens comes from `open_client`, so that each form of REDIS_URL
(gateway.bus.urls) works for nodes, relays, the pub/sub links and the CLI alike.

Under Sentinel the client is redis-py's own (`Sentinel(...).master_for(...)`): each new connection asks the
sentinels for the primary, so connections made after a failover reach the new one; one to a primary demoted
since fails (READONLY, or the server closes it) and the next connection asks again.
"""

from __future__ import annotations

import re
from typing import Any, Literal, cast, overload

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis, RedisCluster
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis.backoff import NoBackoff

from ..config import ConfigError
from .packing import one_join
from .urls import Sentinels, parse

# redis-py's pool holds at most this many connections and, past them, raises MaxConnectionsError at once: a
# burst of subscribers (16,000 connecting at 1,500 a second) has more reads in flight. They wait for a free
# connection instead, for up to POOL_WAIT seconds.
POOL_CONNECTIONS = 100
POOL_WAIT = 5.0
# A sentinel that does not answer within this long is passed over for the next (its answers are small and quick).
SENTINEL_TIMEOUT = 2.0
# How redis-py names a sentinel it asked in vain (its client's repr, a few hundred characters): host:port will do.
_SENTINEL_REPR = re.compile(r"<redis\.asyncio\.client\.Redis\(<.*?\bhost=([^,]+),port=(\d+),.*?\)>\)>\)>")


@overload
def open_client(url: str, *, cluster: Literal[True]) -> RedisCluster: ...


@overload
def open_client(
    url: str,
    *,
    cluster: Literal[False] = False,
    shard: tuple[str, int] | None = None,
    pooled: bool = False,
    single_connection: bool = False,
    **options: Any,
) -> Redis: ...


def open_client(
    url: str,
    *,
    cluster: bool = False,
    shard: tuple[str, int] | None = None,
    pooled: bool = False,
    single_connection: bool = False,
    **options: Any,
) -> Redis | RedisCluster:
    """A client of what `url` names: its one server, or the primary its sentinels name; with `cluster`, a
    client routing by slot over the Redis Cluster `url` is a node of; with `shard`, the cluster's server at that
    address (with the URL's credentials and TLS).

    `pooled`: up to POOL_CONNECTIONS connections, a command waiting up to POOL_WAIT for one, each command packed
    in one join (gateway.bus.packing): the bus's client for commands. `single_connection`: one connection, kept
    (a listener's). `options` go to each connection (socket options, `retry`). A URL that cannot work raises
    ConfigError."""
    sentinels = parse(url, cluster)
    try:
        if cluster:
            return RedisCluster.from_url(url)
        if sentinels is not None:
            client: Redis = _primary(sentinels, pooled, options)
        else:
            kwargs: dict[str, Any] = {**options, **parse_url(url)}  # as redis-py's from_url: the URL's options win
            if shard is not None:
                kwargs["host"], kwargs["port"] = shard
            client = Redis.from_pool(_pool(BlockingConnectionPool if pooled else ConnectionPool, pooled, kwargs))
    except ValueError as exc:  # redis-py's word on a query option it cannot use ("Invalid value for 'db' ...")
        raise ConfigError(f"REDIS_URL: {exc}") from None
    client.single_connection_client = single_connection  # read at the first command
    return client


def _pool(cls: type[ConnectionPool], pooled: bool, kwargs: dict[str, Any]) -> ConnectionPool:
    if pooled:
        kwargs |= {"max_connections": POOL_CONNECTIONS, "timeout": POOL_WAIT}
    pool = cls(**kwargs)
    if pooled:
        pool.connection_class = one_join(pool.connection_class)
    return pool


def unreachable(exc: BaseException) -> str:
    """One line saying why Redis could not be reached, for the CLI: redis-py's own words, each sentinel asked in
    vain named by its address rather than its client's repr."""
    text = _SENTINEL_REPR.sub(r"sentinel \1:\2", str(exc))
    return f"{type(exc).__name__}: {text}"


class _BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Connections to the primary the sentinels name, waiting for a free one as the bus's pool does."""


class _Primary(Redis):
    """The sentinels' primary: closing the client closes its connections to the sentinels too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        await cast(SentinelConnectionPool, self.connection_pool).sentinel_manager.aclose()


def _primary(sentinels: Sentinels, pooled: bool, options: dict[str, Any]) -> Redis:
    # The sentinels get the connections' socket options (keepalive), a short timeout, and credentials of their own.
    # Each is asked once (as redis-py 8.2 does by default, not 8.1): a sentinel that fails, the next one is asked.
    to_sentinels = {k: v for k, v in options.items() if k.startswith("socket_")}
    to_sentinels |= {
        "socket_connect_timeout": SENTINEL_TIMEOUT,
        "socket_timeout": SENTINEL_TIMEOUT,
        "retry": Retry(NoBackoff(), 0),
    }
    if sentinels.sentinel_password is not None:
        to_sentinels |= {"username": sentinels.sentinel_username, "password": sentinels.sentinel_password}
    manager = Sentinel(list(sentinels.hosts), sentinel_kwargs=to_sentinels)
    kwargs = {**options, "db": sentinels.db, "username": sentinels.username, "password": sentinels.password}
    if pooled:
        kwargs |= {
            "max_connections": POOL_CONNECTIONS,
            "timeout": POOL_WAIT,
            "connection_class": one_join(SentinelManagedConnection),
        }
    pool_class = _BlockingSentinelPool if pooled else SentinelConnectionPool
    return manager.master_for(sentinels.service, redis_class=_Primary, connection_pool_class=pool_class, **kwargs)
