"""What `gateway.client` raises: one tree under `GatewayError`, so a tool can catch everything at once.

    GatewayError
    ├── Unauthorized       the token was refused or expired, and no provider could give a fresh one
    ├── ConnectionFailed   no connection after `max_attempts`, or a handshake refusal that retrying cannot fix
    └── ChannelRefused     the server refused a channel for good (`bad_channel`, `too_many_subscriptions`)
        └── Forbidden      not a member of the channel's team (or no such channel)

`Unauthorized` and `ConnectionFailed` end the client: every later call raises the same error again.
`ChannelRefused` ends only its channel: the client drops it and goes on with the others.
"""

from __future__ import annotations


class GatewayError(Exception):
    """Everything `gateway.client` raises on purpose."""


class Unauthorized(GatewayError):
    """`reason` is the server's (or the token provider's) own words: `token expired`, `invalid token`, ..."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ConnectionFailed(GatewayError):
    def __init__(self, url: str, attempts: int, reason: str) -> None:
        plural = "" if attempts == 1 else "s"
        super().__init__(f"cannot connect to {url} after {attempts} attempt{plural}: {reason}")
        self.url = url
        self.attempts = attempts
        self.reason = reason


class ChannelRefused(GatewayError):
    """The server's `error` about a channel that asking again would not change."""

    def __init__(self, channel: str, code: str, message: str) -> None:
        super().__init__(f"{code}: {channel}: {message}")
        self.channel = channel
        self.code = code
        self.message = message


class Forbidden(ChannelRefused):
    pass
