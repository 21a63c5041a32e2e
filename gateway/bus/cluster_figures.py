"""Each cluster's latest figures (CPU, memory, disk, network), kept in Redis for the relay to publish.

Ingest reports them about once a second, whichever node takes the request; the relay of the team's partition
reads them back and sends the team channel's cluster stats when they change. Per team a hash by cluster id,
and one set naming the teams that have reported (the ones worth reading).
"""

from __future__ import annotations

from typing import cast

import msgspec
from redis.asyncio import Redis

from ..core.team import ClusterFigures
from . import keys

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ClusterFigures)


async def report(redis: Redis, team_id: int, figures: ClusterFigures) -> None:
    """Keep a cluster's newest figures (they replace its previous ones)."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hset(keys.metrics(team_id), str(figures.id), _encoder.encode(figures))
        pipe.sadd(keys.METRICS_TEAMS, team_id)
        await pipe.execute()


async def teams(redis: Redis) -> list[int]:
    """The teams that have had clusters reporting."""
    return [int(keys.text(t)) for t in await redis.smembers(keys.METRICS_TEAMS)]


async def read(redis: Redis, team_id: int) -> list[ClusterFigures]:
    """The latest figures of each of the team's clusters."""
    return (await read_teams(redis, [team_id]))[team_id]


async def read_teams(redis: Redis, team_ids: list[int]) -> dict[int, list[ClusterFigures]]:
    """The latest figures of each team's clusters, in one round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for team_id in team_ids:
            pipe.hgetall(keys.metrics(team_id))
        replies = cast(list[dict[bytes, bytes]], await pipe.execute())
    return {t: [_decoder.decode(v) for v in reports.values()] for t, reports in zip(team_ids, replies)}
