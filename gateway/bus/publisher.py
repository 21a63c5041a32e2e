"""The relay's side of the bus: publish each message with its position, history and state, fenced by epoch.

A cycle's messages go out through one Lua script call, atomically: refuse if a newer relay has taken over
(the partition's fence key holds the newest epoch); then for each message record the channel's position,
append the message to the channel's bounded history (a stream whose ids are the channel's sequence
numbers), write the light channel's state, publish (SPUBLISH in a cluster: the shard that holds the keys).
So a node that reads a channel's state sees it with the sequence it belongs to, and a relay that lost its
lock cannot publish after its successor's first message.

`PartitionPublisher` is what the relay needs of the bus; `Publisher` is it on Redis, and an in-memory bus
with the same semantics stands in for it in fast tests.
"""

from __future__ import annotations

import time
from typing import Protocol

from redis.asyncio import Redis
from redis.asyncio.connection import Connection
from redis.exceptions import NoScriptError, ResponseError

from ..core import envelope
from ..core.protocol import parse_cursor
from ..core.publication import Publication
from . import keys
from .connection import MOVED, Bus
from .errors import BusBehind, Fenced
from .translate import translated

__all__ = ["CALL_BYTES", "HISTORY_BYTES", "BusBehind", "Fenced", "PartitionPublisher", "Publisher"]

# One call publishes many messages of a cycle (a round trip and a command per cycle, not per message).
# KEYS: the fence, the relay cursor, the previous call's last position key (a cycle's later calls), then per
# message its seq, history, history sizes and state keys (and its marker). ARGV: epoch, history length, history
# TTL, the relay cursor ('' for none), history bytes, the previous call's last seq ('' for a first call), the relay
# cursor the bus should hold ('' for no check; a cycle's last call), then per message: seq, pub/sub channel, envelope, the length of the envelope's MessagePack payload (its tail: the
# history entry, so the payload is not sent twice), the state fields to set (count, then pairs; -1 when the
# message has no state), the fields to delete (count, then names), whether a marker key follows.
#
# The history is bounded in messages and in bytes. Redis streams trim only by count or id, so a list beside
# each stream holds where each entry ends in a running count of its bytes, behind where the oldest begins:
# the history's bytes are its last item less its first, and trimming the oldest entry is one LPOP (the stream
# is then cut to as many entries, exactly). A stream without its list (a history from before the bound, or one
# a key's loss left uneven) starts again.
#
# A cycle sent again after a partial failure (Redis refused its second call: out of memory, a cut connection)
# skips the messages that went out the first time: the channel's position already holds them, in this epoch.
# A call runs only if the one before it went out, so what went out is always the cycle's beginning.
#
# A bus that lost what this relay wrote (a failover to a replica behind the old primary, or a restart) holds
# another relay cursor than the one the relay last wrote: the cycle's last call refuses (2), writing nothing, so
# that the relay sends every team's whole state again rather than leave the lost state in place for snapshots.
_PUBLISH = """
local epoch = ARGV[1]
local held = redis.call('GET', KEYS[1])
if tonumber(held or '0') > tonumber(epoch) then return 0 end
-- Redis out of memory refuses a script's first write that may grow memory, and none after it: this one (the
-- fence as it is) comes first, so such a Redis refuses the call whole and nothing of it is written.
if ARGV[6] ~= '' then
  -- not the cycle's first call: the one before must have gone out (its last message's position is there), or a
  -- refused call would leave a hole that the next one's messages jump over
  local e, s = string.match(redis.call('GET', KEYS[3]) or '', '^(%d+)-(%d+)$')
  if not (e == epoch and tonumber(s) >= tonumber(ARGV[6])) then
    return redis.error_reply('ERR an earlier call of the cycle did not go out')
  end
end
if ARGV[7] ~= '' then
  local cursor = redis.call('GET', KEYS[2])
  -- the cycle's own cursor: a cycle sent again whose last call went out the first time, its answer lost
  if cursor ~= ARGV[7] and not (ARGV[4] ~= '' and cursor == ARGV[4]) then return 2 end
end
if held then
  redis.call('SET', KEYS[1], held, 'KEEPTTL')
end
local maxlen, ttl, maxbytes = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[5])

local function keep(hist, sizes, seq, entry)
  local id = seq .. '-0'
  local fresh = redis.call('LLEN', sizes) ~= redis.call('XLEN', hist) + 1
  if fresh then
    redis.call('DEL', hist, sizes)
  end
  local added, refusal = pcall(redis.call, 'XADD', hist, id, 'e', epoch, 'm', entry)
  if not added then
    if not string.find(tostring(refusal.err or refusal), 'equal or smaller', 1, true) then
      error(refusal)  -- anything else (a key of the wrong type) fails the call
    end
    -- the stream holds a later id (Redis kept a history the positions lost): start it again
    redis.call('DEL', hist, sizes)
    redis.call('XADD', hist, id, 'e', epoch, 'm', entry)
    fresh = true
  end
  if fresh then
    redis.call('RPUSH', sizes, 0)
  end
  local top = tonumber(redis.call('LINDEX', sizes, -1)) + #entry
  local n = redis.call('RPUSH', sizes, top) - 1
  local kept = n
  while kept > 1 and (kept > maxlen or top - tonumber(redis.call('LINDEX', sizes, 0)) > maxbytes) do
    redis.call('LPOP', sizes)
    kept = kept - 1
  end
  if kept < n then
    redis.call('XTRIM', hist, 'MAXLEN', kept)
  end
  redis.call('EXPIRE', hist, ttl)
  redis.call('EXPIRE', sizes, ttl)
end

local a, k = 8, 4
while a <= #ARGV do
  local seq, channel, env = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local position, hist, sizes, state = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local at = redis.call('GET', position)
  local sent = false
  if at then
    local e, s = string.match(at, '^(%d+)-(%d+)$')
    sent = e == epoch and tonumber(s) >= tonumber(seq)
  end
  if not sent then
    keep(hist, sizes, seq, string.sub(env, -tonumber(ARGV[a + 3])))
  end
  local n = tonumber(ARGV[a + 4])
  a = a + 5
  if sent then
    a = a + math.max(n, 0) * 2
  elseif n >= 0 then
    redis.call('HSET', state, 'seq', seq, 'epoch', epoch)
    for i = a, a + 2 * n - 1, 2 do
      redis.call('HSET', state, ARGV[i], ARGV[i + 1])
    end
    a = a + 2 * n
  elseif redis.call('EXISTS', state) == 1 then
    -- an event (a glow, a notice) changes no state, but a snapshot of the state is now at this seq
    redis.call('HSET', state, 'seq', seq, 'epoch', epoch)
  end
  local d = tonumber(ARGV[a])
  if not sent then
    for i = a + 1, a + d do
      redis.call('HDEL', state, ARGV[i])
    end
    redis.call('PUBLISH', channel, env)
  end
  a = a + 1 + d
  if ARGV[a] == '1' then
    if not sent then
      redis.call('SET', KEYS[k + 4], epoch, 'EX', 86400)  -- an event published once: a successor skips it
    end
    k = k + 1
  end
  if not sent then
    -- last: a message the script failed part-way through (a key of the wrong type) goes out again whole
    redis.call('SET', position, epoch .. '-' .. seq)
  end
  a = a + 1
  k = k + 4
end
if ARGV[4] ~= '' then
  redis.call('SET', KEYS[2], ARGV[4])
end
return 1
"""

# A call carries at most this many bytes of messages: one script holds Redis while it runs.
CALL_BYTES = 1 << 20

HISTORY_BYTES = 8 << 20  # GATEWAY_HISTORY_BYTES: a channel's history holds at most this many bytes of messages

_TAKE_OVER = """
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
if fence > tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""


class PartitionPublisher(Protocol):
    """Publishes one partition's channels for one relay epoch, fenced against older epochs."""

    epoch: int

    async def take_over(self) -> None:
        """Raise the fence to this epoch; raise Fenced if a newer one holds it."""

    async def fence_exists(self) -> bool:
        """False when the bus lost the partition's keys (a restart)."""

    async def behind(self) -> bool:
        """Whether the bus lost what this relay published: no fence, or another relay cursor than the one this
        publisher last read or wrote (a failover to a replica behind the old primary, a restart)."""

    async def last_seqs(self, channels: list[str]) -> dict[str, int]:
        """The last sequence published on each channel, by any relay (0 when none)."""

    def marker(self, trajectory_id: int, wave: int) -> str:
        """The name of a wave's once-only finish marker."""

    async def published_markers(self, markers: list[str]) -> set[str]:
        """Which of these once-only events some relay has published already."""

    async def relay_cursor(self) -> str | None:
        """Where in the outbox the previous relay had published up to."""

    async def publish(
        self,
        publications: list[Publication],
        relay_cursor: str | None = None,
        committed: float = 0.0,
        trace: str | None = None,
    ) -> None:
        """Publish a cycle atomically per message, with the cursor; raise Fenced if a newer relay took over, and
        BusBehind if the bus holds another relay cursor than the one this publisher last read or wrote (reading
        it again accepts the bus as it is). `committed`: the oldest commit time of the cycle's changes, carried
        in each envelope (0.0: none); `trace`: the traceparent of the relay's publish span, likewise (None: not
        traced, gateway.tracing)."""


class Publisher:
    """Publishes one partition's channels: all of its keys share the partition's tag, hence one server."""

    def __init__(
        self, bus: Bus, tag: str, epoch: int, history_length: int, history_ttl: int, history_bytes: int = HISTORY_BYTES
    ) -> None:
        self.bus = bus
        self.tag = tag
        self.epoch = epoch
        self.history_length = history_length
        self.history_ttl = history_ttl
        self.history_bytes = history_bytes
        self._fence_key = keys.epoch(tag)
        script = _PUBLISH.replace("'PUBLISH'", "'SPUBLISH'") if bus.cluster else _PUBLISH
        self._publish = bus.redis.register_script(script)
        self._take_over = bus.redis.register_script(_TAKE_OVER)
        self._cursor_on_bus: str | None = None  # the relay cursor last read or written; None: nothing to check

    @translated
    async def take_over(self) -> None:
        """Raise the fence to this relay's epoch; from now on older relays' publishes are refused."""
        if not await self._take_over(keys=[self._fence_key], args=[self.epoch]):
            raise Fenced(f"epoch {self.epoch} is older than the fence")

    @translated
    async def fence_exists(self) -> bool:
        """False when Redis lost the partition's keys (a restart)."""
        return bool(await self.bus.redis.exists(self._fence_key))

    @translated
    async def behind(self) -> bool:
        """Whether the bus lost what this relay published: no fence, or another relay cursor than the one this
        publisher last read or wrote."""
        fence, cursor = await self.bus.mget([self._fence_key, keys.relay_cursor(self.tag)])
        expected = self._cursor_on_bus
        return fence is None or expected is not None and (keys.text(cursor) if cursor is not None else None) != expected

    @translated
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

    @translated
    async def published_markers(self, markers: list[str]) -> set[str]:
        """Which of these once-only events some relay has published already."""
        values = await self.bus.mget(markers)
        return {m for m, v in zip(markers, values) if v is not None}

    @translated
    async def relay_cursor(self) -> str | None:
        """Where in the outbox the previous relay had published up to."""
        value = await self.bus.redis.get(keys.relay_cursor(self.tag))
        self._cursor_on_bus = keys.text(value) if value is not None else None
        return self._cursor_on_bus

    @translated
    async def publish(
        self,
        publications: list[Publication],
        relay_cursor: str | None = None,
        committed: float = 0.0,
        trace: str | None = None,
    ) -> None:
        """Publish a cycle in one round trip; each message is atomic with its position, history and state."""
        if not publications and relay_cursor is None:
            return
        try:
            server = await self.bus.server_for(self._fence_key)
            results = await self._run(server, publications, relay_cursor, committed, trace)
            if results and all(isinstance(r, NoScriptError) for r in results):
                # Redis lost its scripts (a restart) and ran nothing of the cycle: load them, run it again.
                await server.script_load(self._publish.script)
                results = await self._run(server, publications, relay_cursor, committed, trace)
            for result in results:
                if isinstance(result, ResponseError):
                    raise result
        except MOVED:
            await self.bus.refresh()  # the partition's slot moved: the caller retries on its new server
            raise
        if not all(results):
            raise Fenced(f"relay epoch {self.epoch} was fenced out by a newer relay")
        if results[-1] == 2:
            raise BusBehind(f"the bus holds another relay cursor than {self._cursor_on_bus}")
        self._cursor_on_bus = relay_cursor or self._cursor_on_bus

    async def _run(
        self,
        server: Redis,
        publications: list[Publication],
        relay_cursor: str | None,
        committed: float,
        trace: str | None = None,
    ) -> list[object]:
        """The cycle's calls in one write on a connection of the pool, the answers read back (an error answer
        as its exception), as redis-py's pipeline sends them: its machinery around the same write cost a busy
        relay about a tenth of its CPU. A connection Redis closed fails the cycle with a ConnectionError after
        it is disconnected (redis-py's retry policy of the connection, as the pipeline applied it); the relay's
        cycle sends it again, on a fresh connection (docs/operations.md says why the publisher does not hold a
        connection of its own)."""
        calls = self.calls(publications, relay_cursor, committed, trace)
        pool = server.connection_pool
        conn = await pool.get_connection()
        try:
            return await conn.retry.call_with_retry(lambda: _send(conn, calls), lambda _: conn.disconnect())
        finally:
            await pool.release(conn)

    def calls(
        self, publications: list[Publication], relay_cursor: str | None, committed: float, trace: str | None = None
    ) -> list[list[bytes | str | int]]:
        """The cycle as EVALSHA commands: normally one. (redis-py's script objects would ask SCRIPT EXISTS
        first, a second round trip per cycle.) Built without I/O: bench.relay_core packs them as the relay does."""
        tag = self.tag
        calls: list[list[bytes | str | int]] = []
        script_keys: list[str] = []
        args: list[bytes | str | int] = []
        size = 0
        published = time.time()  # in each envelope: nodes measure publish to write from it
        after: Publication | None = None  # the previous call's last message
        for i, p in enumerate(publications):
            if size > CALL_BYTES:
                calls.append(self._call(script_keys, args, "", after, ""))
                script_keys, args, size = [], [], 0
                after = publications[i - 1]
            env = envelope.pack(p.epoch, p.seq, p.json, p.msgpack, published, committed, trace)
            size += len(env)
            script_keys += [
                keys.seq(tag, p.channel),
                keys.history(tag, p.channel),
                keys.history_sizes(tag, p.channel),
                keys.state(tag, p.channel),
            ]
            args += [p.seq, keys.pubsub(tag, p.channel), env, len(p.msgpack)]
            state_set, state_del = p.state_set or {}, p.state_del or []
            if p.state_set is None and not state_del:
                args.append(-1)  # no state with this message
            else:
                args.append(len(state_set))
                for field, value in state_set.items():
                    args += [field, value]
            args += [len(state_del), *state_del]
            if p.marker is not None:
                script_keys.append(p.marker)
            args.append(1 if p.marker is not None else 0)
        calls.append(self._call(script_keys, args, relay_cursor or "", after, self._cursor_on_bus or ""))
        return calls

    def _call(
        self,
        script_keys: list[str],
        args: list[bytes | str | int],
        relay_cursor: str,
        after: Publication | None,
        on_bus: str,
    ) -> list[bytes | str | int]:
        return [
            "EVALSHA",
            self._publish.sha,
            3 + len(script_keys),
            self._fence_key,
            keys.relay_cursor(self.tag),
            keys.seq(self.tag, after.channel) if after is not None else self._fence_key,
            *script_keys,
            self.epoch,
            self.history_length,
            self.history_ttl,
            relay_cursor,
            self.history_bytes,
            after.seq if after is not None else "",
            on_bus,
            *args,
        ]


async def _send(conn: Connection, calls: list[list[bytes | str | int]]) -> list[object]:
    """Write the calls at once and read every answer, errors included, so the connection stays in step."""
    await conn.send_packed_command(conn.pack_commands(calls))
    answers: list[object] = []
    for _ in calls:
        try:
            answers.append(await conn.read_response())
        except ResponseError as exc:
            answers.append(exc)
    return answers
