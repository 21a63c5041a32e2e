"""The relay's side of the bus: publish each message with its position, history and state, fenced by epoch.

Each message goes out through one Lua script, atomically: refuse if a newer relay has taken over (the fence
key holds the newest epoch), record the channel's position, append the message to the channel's bounded
history (a stream whose ids are the channel's sequence numbers), write the light channel's state, publish.
So a node that reads a channel's state sees it with the sequence it belongs to, and a relay that lost its
lock cannot publish after its successor's first message.
"""

from __future__ import annotations

from redis.asyncio import Redis

from ..core import envelope
from ..core.protocol import parse_cursor
from ..core.relay import Publication
from . import keys

_PUBLISH = """
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
if fence > tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[2], ARGV[1] .. '-' .. ARGV[2])
local id = ARGV[2] .. '-0'
local ok = pcall(redis.call, 'XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], id, 'e', ARGV[1], 'm', ARGV[5])
if not ok then
  -- the stream holds a later id (Redis kept a history the positions lost): start it again
  redis.call('DEL', KEYS[3])
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], id, 'e', ARGV[1], 'm', ARGV[5])
end
redis.call('EXPIRE', KEYS[3], ARGV[7])
local n = tonumber(ARGV[8])
if n >= 0 then
  redis.call('HSET', KEYS[4], 'seq', ARGV[2], 'epoch', ARGV[1])
  local i = 9
  while i < 9 + 2 * n do
    redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  while i <= #ARGV do
    redis.call('HDEL', KEYS[4], ARGV[i])
    i = i + 1
  end
elseif redis.call('EXISTS', KEYS[4]) == 1 then
  -- an event (a glow, a notice) changes no state, but a snapshot of the state is now at this seq
  redis.call('HSET', KEYS[4], 'seq', ARGV[2], 'epoch', ARGV[1])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
if #KEYS >= 5 then
  redis.call('SET', KEYS[5], ARGV[1], 'EX', 86400)  -- an event published once: a successor skips it
end
return 1
"""

_TAKE_OVER = """
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
if fence > tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""

_FENCED_SET = """
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
if fence > tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""


class Fenced(Exception):
    """A newer relay has taken over: this one must stop publishing."""


class Publisher:
    def __init__(self, redis: Redis, epoch: int, history_length: int, history_ttl: int) -> None:
        self.redis = redis
        self.epoch = epoch
        self.history_length = history_length
        self.history_ttl = history_ttl
        self._publish = redis.register_script(_PUBLISH)
        self._take_over = redis.register_script(_TAKE_OVER)
        self._fenced_set = redis.register_script(_FENCED_SET)

    async def take_over(self) -> None:
        """Raise the fence to this relay's epoch; from now on older relays' publishes are refused."""
        if not await self._take_over(keys=[keys.EPOCH], args=[self.epoch]):
            raise Fenced(f"epoch {self.epoch} is older than the fence")

    async def last_seqs(self, channels: list[str]) -> dict[str, int]:
        """The last sequence published on each channel, by any relay before this one (0 when none)."""
        if not channels:
            return {}
        values = await self.redis.mget([keys.seq(c) for c in channels])
        out: dict[str, int] = {}
        for channel, value in zip(channels, values):
            position = parse_cursor(keys.text(value)) if value is not None else None
            out[channel] = position[1] if position else 0
        return out

    async def published_markers(self, markers: list[str]) -> set[str]:
        """Which of these once-only events some relay has published already."""
        if not markers:
            return set()
        values = await self.redis.mget(markers)
        return {m for m, v in zip(markers, values) if v is not None}

    async def relay_cursor(self) -> str | None:
        """Where in the outbox the previous relay had published up to."""
        value = await self.redis.get(keys.RELAY_CURSOR)
        return keys.text(value) if value is not None else None

    async def publish(self, publications: list[Publication], relay_cursor: str | None = None) -> None:
        """Publish a cycle in one round trip; each message is atomic with its position, history and state."""
        if not publications and relay_cursor is None:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            results = await self._run(pipe, publications, relay_cursor)
        if not all(results):
            raise Fenced(f"relay epoch {self.epoch} was fenced out by a newer relay")

    async def _run(self, pipe, publications: list[Publication], relay_cursor: str | None) -> list[object]:
        for p in publications:
            args: list[bytes | str | int] = [
                p.epoch,
                p.seq,
                keys.pubsub(p.channel),
                envelope.pack(p.epoch, p.seq, p.json, p.msgpack),
                p.msgpack,
                self.history_length,
                self.history_ttl,
            ]
            if p.state_set is None and not p.state_del:
                args.append(-1)
            else:
                state_set = p.state_set or {}
                args.append(len(state_set))
                for field, value in state_set.items():
                    args += [field, value]
                args += p.state_del or []
            script_keys = [keys.EPOCH, keys.seq(p.channel), keys.history(p.channel), keys.state(p.channel)]
            if p.marker is not None:
                script_keys.append(p.marker)
            await self._publish(keys=script_keys, args=args, client=pipe)
        if relay_cursor is not None:
            await self._fenced_set(keys=[keys.EPOCH, keys.RELAY_CURSOR], args=[self.epoch, relay_cursor], client=pipe)
        return await pipe.execute()
