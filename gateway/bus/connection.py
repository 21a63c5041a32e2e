"""How a process reaches Redis: one server, or a Redis Cluster with sharded pub/sub.

`redis` routes single-key commands (redis-py's cluster client follows MOVED by itself). The relay's scripted
pipelines and the nodes' pub/sub connections go to one server each: `server_for` finds the one that holds a
key's slot, and `refresh` reloads the slot map after a slot has moved or a server failed.
"""

from __future__ import annotations

from typing import Any, cast

import redis
from redis.asyncio import BlockingConnectionPool, Connection, Redis, RedisCluster
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

from .keys import Partitions
from .packing import one_join

# The answers that mean "ask the cluster where this slot lives now".
MOVED = (MovedError, AskError, TryAgainError, ClusterDownError)


# redis-py's pool holds at most this many connections and, past them, raises MaxConnectionsError at once: a
# burst of subscribers (16,000 connecting at 1,500 a second) has more reads in flight. They wait for a free
# connection instead, for up to POOL_WAIT seconds.
POOL_CONNECTIONS = 100
POOL_WAIT = 5.0


def connect(url: str, cluster: bool = False) -> Any:
    """A client for single-key commands: of one server, or routing by slot over a cluster."""
    if cluster:
        return RedisCluster.from_url(url)
    pool = BlockingConnectionPool.from_url(url, max_connections=POOL_CONNECTIONS, timeout=POOL_WAIT)
    pool.connection_class = one_join(pool.connection_class)
    # from_pool: the client owns the pool, so closing the client closes its connections.
    return Redis.from_pool(pool)


# Sharded pub/sub on a plain asyncio connection (`PubSub.ssubscribe`), `RedisCluster.mget_nonatomic` and the
# slot map's `nodes_manager.initialize()` are what cluster mode uses; tested with 8.1 (pyproject pins 8.x).
CLUSTER_REDIS_PY = (8, 1)


class Bus:
    def __init__(self, url: str, cluster: bool = False, partitions: int = 1) -> None:
        if cluster and tuple(int(x) for x in redis.__version__.split(".")[:2]) < CLUSTER_REDIS_PY:
            raise RuntimeError(f"GATEWAY_REDIS_CLUSTER needs redis-py >= 8.1, not {redis.__version__}")
        self.url = url
        self.cluster = cluster
        self.partitions = Partitions(partitions)
        self.redis: Any = connect(url, cluster)
        self._servers: dict[str, Redis] = {}

    async def server_for(self, key: str) -> Redis:
        """A client of the one server holding `key` (the only server when not clustered)."""
        if not self.cluster:
            return cast(Redis, self.redis)
        return self.server(*await self.address_for(key))

    async def address_for(self, key: str) -> tuple[str, int]:
        cluster = cast(RedisCluster, self.redis)
        await cluster.initialize()
        node = cluster.get_node_from_key(key)
        assert node is not None
        return node.host, int(node.port)

    def server(self, host: str, port: int) -> Redis:
        name = f"{host}:{port}"
        client = self._servers.get(name)
        if client is None:
            pool = BlockingConnectionPool(
                host=host,
                port=port,
                max_connections=POOL_CONNECTIONS,
                timeout=POOL_WAIT,
                connection_class=one_join(Connection),
            )
            client = self._servers[name] = Redis.from_pool(pool)
        return client

    async def refresh(self) -> None:
        """Reload the slot map (a slot moved, a server failed over)."""
        if self.cluster:
            await cast(RedisCluster, self.redis).nodes_manager.initialize()

    async def mget(self, names: list[str]) -> list[bytes | None]:
        """Values of keys that may live on different shards."""
        if not names:
            return []
        if self.cluster:
            return cast(list[bytes | None], await self.redis.mget_nonatomic(names))
        return cast(list[bytes | None], await self.redis.mget(names))

    async def aclose(self) -> None:
        for client in self._servers.values():
            await client.aclose()
        await self.redis.aclose()
