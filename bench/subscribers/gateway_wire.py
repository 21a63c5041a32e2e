"""The gateway's messages as the benchmark reads them (docs/protocol.md): msgspec Structs holding only the fields
a subscriber keeps, and one decoder per wire format."""

from __future__ import annotations

from datetime import datetime

import msgspec


class Job(msgspec.Struct):
    id: int
    version: int
    status: str
    updated_at: datetime | None = None
    removed_at: datetime | None = None


class Trajectory(msgspec.Struct):
    updated_at: datetime | None = None


class Message(msgspec.Struct, tag_field="type"):
    pass


class Snapshot(Message, tag="snapshot"):
    channel: str
    seq: int
    cursor: str
    page: int = 0
    final: bool = True
    jobs: list[Job] | None = None
    counts: dict[str, int] | None = None


class Batch(Message, tag="batch"):
    channel: str
    seq: int
    cursor: str
    jobs: list[Job] = []


class Summary(Message, tag="summary"):
    channel: str
    seq: int
    cursor: str
    counts: dict[str, int] | None = None
    trajectories: list[Trajectory] = []


class Event(Message):
    """A channel message whose content the benchmark does not keep: only its position counts."""

    channel: str
    seq: int
    cursor: str


class Notice(Event, tag="notice"):
    pass


class Glow(Event, tag="glow"):
    pass


class Presence(Event, tag="presence"):
    pass


class Clusters(Event, tag="clusters"):
    pass


class Resync(Message, tag="resync"):
    channel: str
    reason: str = ""


class Error(Message, tag="error"):
    code: str = ""
    message: str = ""
    channel: str | None = None


class Pong(Message, tag="pong"):
    id: int | str | None = None


class Other(msgspec.Struct):
    """Any other message: its channel position is still tracked."""

    type: str = ""
    channel: str | None = None
    seq: int | None = None
    cursor: str | None = None


GatewayMessage = Batch | Snapshot | Summary | Notice | Glow | Presence | Clusters | Resync | Error | Pong
json_messages = msgspec.json.Decoder(GatewayMessage)
msgpack_messages = msgspec.msgpack.Decoder(GatewayMessage)
json_other = msgspec.json.Decoder(Other)
msgpack_other = msgspec.msgpack.Decoder(Other)
