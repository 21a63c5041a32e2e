"""Redis names for a channel. One prefix so that a shared Redis can hold other things too."""

PREFIX = "gw:"
EPOCH = f"{PREFIX}epoch"  # the newest relay epoch: older relays' publishes are refused
RELAY_CURSOR = f"{PREFIX}relay:cursor"  # how far in the outbox the relays have published
RELAY_STATS = f"{PREFIX}relay:stats"
CONTROL = f"{PREFIX}control"  # relay -> every node: membership changes  # the active relay's heartbeat and figures, for /metrics and /readyz


def pubsub(channel: str) -> str:
    return f"{PREFIX}ch:{channel}"


def seq(channel: str) -> str:
    return f"{PREFIX}seq:{channel}"


def state(channel: str) -> str:
    """The light channel's current state (a hash), written atomically with each publish."""
    return f"{PREFIX}state:{channel}"


def history(channel: str) -> str:
    """The channel's recent messages (MessagePack), a stream whose ids are `<seq>-0`."""
    return f"{PREFIX}hist:{channel}"


def finish_marker(trajectory_id: int, wave: int) -> str:
    """Set when a wave's finish (notice and glow) has been published."""
    return f"{PREFIX}finish:{trajectory_id}:{wave}"


PRESENCE_TEAMS = f"{PREFIX}presence:teams"
METRICS_TEAMS = f"{PREFIX}metrics:teams"


def presence(team_id: int) -> str:
    """Who is online in a team: a sorted set of `<user>:<node>` scored by when the entry expires."""
    return f"{PREFIX}presence:{team_id}"


def metrics(team_id: int) -> str:
    """The latest figures of each of a team's clusters (a hash by cluster id)."""
    return f"{PREFIX}metrics:{team_id}"


def cluster_commands(cluster_id: int) -> str:
    """The pub/sub channel a cluster listens on for commands."""
    return f"{PREFIX}cluster:{cluster_id}"


def reply(command_id: str) -> str:
    """The list a command's confirmations are pushed onto."""
    return f"{PREFIX}reply:{command_id}"


def text(value: bytes | str) -> str:
    """Redis answers bytes (the clients here do not decode responses)."""
    return value.decode() if isinstance(value, bytes) else value


def channel_of(pubsub_name: str) -> str:
    return pubsub_name[len(PREFIX) + 3 :]
