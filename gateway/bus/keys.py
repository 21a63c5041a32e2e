"""Redis names for a channel. One prefix so that a shared Redis can hold other things too."""

PREFIX = "gw:"


def pubsub(channel: str) -> str:
    return f"{PREFIX}ch:{channel}"


def seq(channel: str) -> str:
    return f"{PREFIX}seq:{channel}"


def state(channel: str) -> str:
    """The light channel's current state (a hash), written atomically with each publish."""
    return f"{PREFIX}state:{channel}"


def channel_of(pubsub_name: str) -> str:
    return pubsub_name[len(PREFIX) + 3 :]
