"""A Python client for the gateway's feeds: connect with a token, subscribe, iterate over messages.

    async with GatewayClient("http://127.0.0.1:8000", token_provider=get_token) as client:
        await client.subscribe("team-jobs:7")
        async for message in client:
            ...  # Snapshot, Batch, Summary, Notice, Glow, ... (msgspec Structs from gateway.core.protocol)

Connecting, the first time as after a drop, is retried with backoff and jitter (a busy node's `retry_after_ms`
is honoured, and so is the retry hint of a node that closes with 1012 as it restarts) until it works, or
`max_attempts` attempts in a row failed: `ConnectionFailed` (the dialing is gateway.client.dial's). After a
drop it resumes every channel from its cursor; on `resync`, or a sequence that does not follow, it subscribes
again without a cursor and yields the fresh snapshot, page by page (the checks are gateway.core.follower's).
A `token_provider` (a plain or async function; `token_from_command("gateway token --user 1")` runs a command)
is asked again after a 401 at the handshake or a close 4001; without one, or when its fresh token is refused
too, `Unauthorized` is raised.

Errors (gateway.client.errors, all `GatewayError`) are raised from iteration, and `Unauthorized` and
`ConnectionFailed` also from `subscribe` and `async with`; they end the client. A channel the server refuses
for good (`Forbidden`, or `ChannelRefused` for a bad name or too many subscriptions) is dropped, recorded in
`client.refused` and raised from iteration once (a name over 100 characters by `subscribe` itself); iterating
again goes on with the other channels. Other `error` messages are yielded (`rate_limited`, `bad_message`, and
`unavailable`/`internal` about a channel, which the client asks for again after a backoff).
"""

from .channels import Followed
from .client import CLOSE_TOKEN_EXPIRED, MAX_CHANNEL_CHARS, GatewayClient, State, websocket_url
from .errors import ChannelRefused, ConnectionFailed, Forbidden, GatewayError, Unauthorized
from .tokens import TokenProvider, token_from_command

__all__ = [
    "ChannelRefused", "ConnectionFailed", "Forbidden", "GatewayClient", "GatewayError", "State", "TokenProvider",
    "Unauthorized", "token_from_command", "websocket_url",
    # importable from here since the client was one module: its close code, its name bound, a channel's state
    "CLOSE_TOKEN_EXPIRED", "MAX_CHANNEL_CHARS", "Followed",
]  # fmt: skip
