"""The relay's side of the bus: publish each message with its position, history and state, fenced by epoch.

Each message goes out through one Lua script, atomically: refuse if a newer relay has taken over (the
partition's fence key holds the newest epoch), record the channel's position, append the message to the
channel's bounded history (a stream whose ids are the channel's sequence numbers), write the light
channel's state, publish (SPUBLISH in a cluster: the shard that holds the keys).
So a node that reads a channel's state sees it with the sequence it belongs to, and a relay that lost its
lock cannot publish after its successor's first message.
"""

from __future__ import annotations

from redis.exceptions import NoScriptError, ResponseError

from ..core import envelope
from ..core.protocol import parse_cursor
from ..core.relay import Publication
from . import keys
from .connection import MOVED, Bus

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
    """Publishes one partition's channels: all of its keys share the partition's tag, hence one server."""

    def __init__(self, bus: Bus, tag: str, epoch: int, history_length: int, history_ttl: int) -> None:
        self.bus = bus
        self.tag = tag
        self.epoch = epoch
        self.history_length = history_length
        self.history_ttl = history_ttl
        self._fence_key = keys.epoch(tag)
        script = _PUBLISH.replace("'PUBLISH'", "'SPUBLISH'") if bus.cluster else _PUBLISH
        self._publish = bus.redis.register_script(script)
        self._take_over = bus.redis.register_script(_TAKE_OVER)
        self._fenced_set = bus.redis.register_script(_FENCED_SET)

    async def take_over(self) -> None:
        """Raise the fence to this relay's epoch; from now on older relays' publishes are refused."""
        if not await self._take_over(keys=[self._fence_key], args=[self.epoch]):
            raise Fenced(f"epoch {self.epoch} is older than the fence")

    async def fence_exists(self) -> bool:
        """False when Redis lost the partition's keys (a restart)."""
        return bool(await self.bus.redis.exists(self._fence_key))

    async def last_seqs(self, channels: list[str]) -> dict[str, int]:
        """The last sequence published on each channel, by any relay before this one (0 when none)."""
        values = await self.bus.mget([keys.seq(self.tag, c) for c in channels])
        out: dict[str, int] = {}
        for channel, value in zip(channels, values):
            position = parse_cursor(keys.text(value)) if value is not None else None
            out[channel] = position[1] if position else 0
        return out

    def marker(self, trajectory_id: int, wave: int) -> str:
        return keys.finish_marker(self.tag, trajectory_id, wave)

    async def published_markers(self, markers: list[str]) -> set[str]:
        """Which of these once-only events some relay has published already."""
        values = await self.bus.mget(markers)
        return {m for m, v in zip(markers, values) if v is not None}

    async def relay_cursor(self) -> str | None:
        """Where in the outbox the previous relay had published up to."""
        value = await self.bus.redis.get(keys.relay_cursor(self.tag))
        return keys.text(value) if value is not None else None

    async def publish(self, publications: list[Publication], relay_cursor: str | None = None) -> None:
        """Publish a cycle in one round trip; each message is atomic with its position, history and state."""
        if not publications and relay_cursor is None:
            return
        try:
            server = await self.bus.server_for(self._fence_key)
            results = await self._run(server, publications, relay_cursor)
            if results and all(isinstance(r, NoScriptError) for r in results):
                # Redis lost its scripts (a restart) and ran nothing of the cycle: load them, run it again.
                for script in (self._publish, self._fenced_set):
                    await server.script_load(script.script)
                results = await self._run(server, publications, relay_cursor)
            for result in results:
                if isinstance(result, ResponseError):
                    raise result
        except MOVED:
            await self.bus.refresh()  # the partition's slot moved: the caller retries on its new server
            raise
        if not all(results):
            raise Fenced(f"relay epoch {self.epoch} was fenced out by a newer relay")

    async def _run(self, server, publications: list[Publication], relay_cursor: str | None) -> list[object]:
        # EVALSHA as plain pipeline commands: redis-py's script objects would ask SCRIPT EXISTS first, a
        # second round trip per cycle.
        tag = self.tag
        async with server.pipeline(transaction=False) as pipe:
            for p in publications:
                args: list[bytes | str | int] = [
                    p.epoch,
                    p.seq,
                    keys.pubsub(tag, p.channel),
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
                script_keys = [self._fence_key, keys.seq(tag, p.channel), keys.history(tag, p.channel), keys.state(tag, p.channel)]
                if p.marker is not None:
                    script_keys.append(p.marker)
                pipe.evalsha(self._publish.sha, len(script_keys), *script_keys, *args)
            if relay_cursor is not None:
                pipe.evalsha(self._fenced_set.sha, 2, self._fence_key, keys.relay_cursor(tag), self.epoch, relay_cursor)
            return await pipe.execute(raise_on_error=False)
