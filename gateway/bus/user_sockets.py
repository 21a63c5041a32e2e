"""How many websockets each user holds in each process (node or worker), kept in Redis so that the per-user
limit holds across them (gateway.core.user_sockets says the rule; gateway.hub.user_sockets is a node's share).

One hash per user, a field per process: `<sockets>:<when the record lapses>` (the process's clock, as for
presence). A claim is a script, so two processes cannot both take the last place; the key itself expires once
no process renews it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from redis.asyncio import Redis

from . import keys
from .translate import translated

# KEYS[1]: the user's records; ARGV: this process, its count with the new socket, the limit, now, when this
# process's record lapses, the key's time to live (ms). 1 when the socket may be held (and recorded), else 0.
_CLAIM = """
local records = redis.call('HGETALL', KEYS[1])
local total = tonumber(ARGV[2])
local now = tonumber(ARGV[4])
for i = 1, #records, 2 do
  if records[i] ~= ARGV[1] then
    local held, lapses = string.match(records[i + 1], '^(%d+):(.+)$')
    if held and tonumber(lapses) > now then
      total = total + tonumber(held)
    else
      redis.call('HDEL', KEYS[1], records[i])
    end
  end
end
if total > tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
"""


class UserSocketCounts:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._claim = redis.register_script(_CLAIM)

    @translated
    async def claim(self, process: str, user_id: int, count: int, limit: int, ttl: float) -> bool:
        """Record `count` sockets of the user in `process` (for `ttl` seconds) if every process's live records
        stay within `limit` with it; False (nothing written) if not."""
        now = time.time()
        args: list[str | int] = [process, count, limit, repr(now), repr(now + ttl), int(ttl * 1000)]
        return bool(await self._claim(keys=[keys.user_sockets(user_id)], args=args))

    @translated
    async def record(self, process: str, counts: Mapping[int, int], ttl: float) -> None:
        """Set the users' records of `process` (a count of 0 takes the record out), for `ttl` seconds."""
        lapses = time.time() + ttl
        async with self.redis.pipeline(transaction=False) as pipe:
            for user_id, count in counts.items():
                key = keys.user_sockets(user_id)
                if count > 0:
                    pipe.hset(key, process, f"{count}:{lapses!r}")
                    pipe.pexpire(key, int(ttl * 1000))
                else:
                    pipe.hdel(key, process)
            await pipe.execute()
