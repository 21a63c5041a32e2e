"""How a process reaches Redis: one server (or the primary Redis Sentinel names), or a Redis Cluster with
sharded pub/sub.

`redis` routes single-key commands (redis-py's cluster client follows MOVED by itself). The relay's scripted
pipelines and the nodes' pub/sub connections go to one server each: `server_for` finds the one that holds a
key's slot, and `refresh` reloads the slot map after a slot has moved or a server failed. Every client is
opened by gateway.bus.clients, whatever form REDIS_URL takes.
"""

from __future__ import annotations

from typing import Any, cast

import redis
from redis.asyncio import Redis, RedisCluster
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

from .clients import open_client
from .keys import Partitions

# The answers that mean "ask the cluster where this slot lives now".
MOVED = (MovedError, AskError, TryAgainError, ClusterDownError)


def connect(url: str, cluster: bool = False) -> Any:
    """A client for single-key commands: of one server (pooled), or routing by slot over a cluster."""
    if cluster:
        return open_client(url, cluster=True)
    return open_client(url, pooled=True)


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
            client = self._servers[name] = open_client(self.url, shard=(host, port), pooled=True)
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
