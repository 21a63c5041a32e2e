"""The websocket wire protocol: one msgspec Struct per message, tagged by `type`.

Every server message about a channel names its `channel` and carries the channel's contiguous `seq`
and an opaque `cursor` (today `<epoch>-<seq>`); a client that reconnects hands back the last cursor it
applied. The same Structs travel as JSON text frames or, with the `msgpack` subprotocol, as binary frames.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec

from .grouping import Group
from .model import Counts, Job, TrajectorySummary
from .submission import SubmissionRow
from .team import ClusterStats, Presence

Format = Literal["json", "msgpack"]
FORMATS: tuple[Format, ...] = ("json", "msgpack")
MSGPACK_SUBPROTOCOL = "msgpack"
JSON_SUBPROTOCOL = "json"


class ClientMessage(msgspec.Struct, tag_field="type", tag=str.lower, forbid_unknown_fields=True):
    pass


ChannelName = Annotated[str, msgspec.Meta(max_length=100)]
# A client's ping id comes back in the pong: kept short, so a reply never costs much more than its request.
PingId = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)] | Annotated[str, msgspec.Meta(max_length=128)] | None


class Subscribe(ClientMessage):
    channel: ChannelName
    cursor: Annotated[str, msgspec.Meta(max_length=40)] | None = None


class Unsubscribe(ClientMessage):
    channel: ChannelName


class Ping(ClientMessage):
    id: PingId = None


ClientMessages = Subscribe | Unsubscribe | Ping


class ServerMessage(msgspec.Struct, tag_field="type", tag=str.lower, kw_only=True, omit_defaults=True):
    pass


class Snapshot(ServerMessage):
    """A channel's state, in pages; `final` marks the last page. Apply batches only after it."""

    channel: str
    seq: int
    cursor: str
    time: int  # server clock, milliseconds since the Unix epoch
    page: int  # 0, 1, ...: page 0 replaces the channel's state
    final: bool  # the last page: live messages follow
    jobs: list[Job] | None = None  # trajectory and team-jobs channels
    groups: list[Group] | None = None  # trajectory channel: frame groups with their colour
    counts: Counts | None = None  # team channel
    trajectories: list[TrajectorySummary] | None = None  # team channel: the most recent ones
    total_trajectories: int | None = None
    presence: Presence | None = None  # team channel, unless single-user
    clusters: ClusterStats | None = None  # team channel, unless local mode
    commands: list[Command] | None = None  # cluster channel: every command not yet confirmed, nor expired


class SnapshotJobs(ServerMessage, tag="snapshot"):
    """A jobs channel's snapshot page with its jobs and groups already encoded (`msgspec.Raw`, in the format being
    written): the same bytes as `Snapshot`, for a page whose jobs or groups go, encoded once, into the pages of
    several subscribers (gateway.hub.snapshots). Sent only; never decoded."""

    channel: str
    seq: int
    cursor: str
    time: int
    page: int
    final: bool
    jobs: msgspec.Raw
    groups: msgspec.Raw | None = None


class Command(ServerMessage):
    """Cluster channel (`cluster:<id>`, its key's only): act on `jobs` (for `sync`, submissions), then confirm
    over HTTP (docs/clusters.md). The same `id` may arrive again (a snapshot lists every command not yet
    confirmed): a cluster acts on an id once. `seq` counts the cluster's commands."""

    channel: str
    seq: int
    cursor: str
    id: str
    action: str
    jobs: list[int]
    priority: int | None = None  # `priority`: run higher numbers first
    instance_type: str | None = None  # `instance_type`: the tasks not run yet use that node type


class Batch(ServerMessage):
    """Job deltas of one channel: each is the job's whole current state, latest version per job."""

    channel: str
    seq: int
    cursor: str
    jobs: list[Job]
    groups: list[Group] | None = None  # trajectory channel: the groups these jobs changed


class Notice(ServerMessage):
    """A trajectory's work finished (on its trajectory channel and its team's): a completion toast. An event,
    never in a snapshot. Not sent when a person cut the work short (removed or killed its jobs)."""

    channel: str
    seq: int
    cursor: str
    trajectory_id: int
    wave: int
    title: str
    level: str  # success | warning
    name: str = ""  # the trajectory's
    users: list[int] = msgspec.field(default_factory=list)  # members whose submissions the wave's jobs belong to


class Glow(ServerMessage):
    """A trajectory just finished all its jobs with none failed (team channel): glow it for 3.5 seconds."""

    channel: str
    seq: int
    cursor: str
    trajectory_id: int
    wave: int


class PresenceUpdate(ServerMessage, tag="presence"):
    """Team channel: members online out of members, across all gateway nodes."""

    channel: str
    seq: int
    cursor: str
    presence: Presence


class ClustersUpdate(ServerMessage, tag="clusters"):
    """Team channel: the team's clusters' live metrics."""

    channel: str
    seq: int
    cursor: str
    clusters: ClusterStats


class Summary(ServerMessage):
    """The team channel's absolute values: the team's counts and the summaries that changed."""

    channel: str
    seq: int
    cursor: str
    counts: Counts
    trajectories: list[TrajectorySummary]
    total_trajectories: int
    submissions: list[SubmissionRow] | None = None  # the rows of the Submissions page that changed
    # More rows changed at once than a message carries: read the Submissions windows again (GET
    # /api/teams/{id}/submissions); the changed rows are not listed.
    reload_submissions: bool = False


class Preferences(ServerMessage, tag="preferences"):
    """The person chose which finishes reach them (Account), in this browser or another: every socket of theirs is
    told at once, on no channel. `finishes`: "mine", "team" or "none"."""

    finishes: str


class Resync(ServerMessage):
    """The server could not deliver everything: drop the channel's state and subscribe again without a cursor."""

    channel: str
    reason: str


class Error(ServerMessage):
    code: str
    message: str
    channel: str | None = None


class Pong(ServerMessage):
    time: int
    id: PingId = None


ServerMessages = (
    Snapshot
    | Command
    | Batch
    | Summary
    | Notice
    | Glow
    | PresenceUpdate
    | ClustersUpdate
    | Preferences
    | Resync
    | Error
    | Pong
)

json_encoder = msgspec.json.Encoder()
msgpack_encoder = msgspec.msgpack.Encoder()
_json_decoder = msgspec.json.Decoder(ClientMessages)
_msgpack_decoder = msgspec.msgpack.Decoder(ClientMessages)
_server_json_decoder = msgspec.json.Decoder(ServerMessages)
_server_msgpack_decoder = msgspec.msgpack.Decoder(ServerMessages)


class BadMessage(ValueError):
    """A client message that cannot be decoded; the text is safe to send back."""


def decode_client(data: bytes | str, fmt: Format) -> ClientMessages:
    try:
        if fmt == "json":
            return _json_decoder.decode(data)
        if isinstance(data, str):
            raise BadMessage("expected a binary MessagePack frame")
        return _msgpack_decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise BadMessage(str(exc)) from None
    except msgspec.DecodeError as exc:
        raise BadMessage(f"malformed {fmt}: {exc}") from None


def encode(message: ServerMessage, fmt: Format) -> bytes:
    return json_encoder.encode(message) if fmt == "json" else msgpack_encoder.encode(message)


def encode_both(message: ServerMessage) -> tuple[bytes, bytes]:
    """Encode once per wire format; the same bytes then go to every subscriber."""
    return json_encoder.encode(message), msgpack_encoder.encode(message)


def decode_server(data: bytes | str, fmt: Format) -> ServerMessages:
    """For clients and tests: the server's messages back into Structs."""
    if fmt == "json":
        return _server_json_decoder.decode(data)
    return _server_msgpack_decoder.decode(data)  # type: ignore[arg-type]


def msgpack_to_json(data: bytes) -> bytes:
    """The JSON form of a stored MessagePack message: the same bytes the relay encoded for JSON."""
    return json_encoder.encode(_server_msgpack_decoder.decode(data))


COMMAND_EPOCH = 1  # a cluster's commands are counted in PostgreSQL: one epoch, whatever relays and the bus do


def make_cursor(epoch: int, seq: int) -> str:
    return f"{epoch}-{seq}"


_CURSOR = re.compile(r"(0|[1-9][0-9]{0,18})-(0|[1-9][0-9]{0,18})")  # ASCII digits, one spelling per value


def parse_cursor(cursor: str) -> tuple[int, int] | None:
    """The (epoch, seq) inside a cursor, or None when it is not one of ours."""
    match = _CURSOR.fullmatch(cursor)
    if match is None:
        return None
    epoch, seq = int(match[1]), int(match[2])
    return (epoch, seq) if epoch < 2**63 and seq < 2**63 else None
