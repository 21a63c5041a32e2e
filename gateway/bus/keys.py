"""Redis names. One prefix so that a shared Redis can hold other things too.

Teams are spread over partitions, each served by one relay. Everything of a partition (its fence, its relay's
cursor and figures, and each of its channels' position, history, state and pub/sub name) carries the
partition's hash tag: in a Redis Cluster they share one slot, so the relay's publish script can check the
fence and write them all atomically, and SPUBLISH reaches the shard that holds them. A trajectory's channel
belongs to its team's partition.
"""

from __future__ import annotations

import itertools

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

PREFIX = "gw:"
# Announcements to every node (gateway.bus.announcements), a classic pub/sub channel per kind (one reaches every
# shard): the relay's membership changes and moved channels, revoked sessions, a person's changed preferences.
MEMBERSHIPS = f"{PREFIX}memberships"
OWNERSHIPS = f"{PREFIX}ownerships"
REVOCATIONS = f"{PREFIX}revocations"
PREFERENCES = f"{PREFIX}preferences"
ANNOUNCEMENTS = (MEMBERSHIPS, OWNERSHIPS, REVOCATIONS, PREFERENCES)
PRESENCE_TEAMS = f"{PREFIX}presence:teams"
METRICS_TEAMS = f"{PREFIX}metrics:teams"


class Partitions:
    """`count` partitions of the teams; partition k's keys share the hash tag `tags[k]`."""

    def __init__(self, count: int = 1) -> None:
        if not 1 <= count <= 1024:
            raise ValueError(f"partitions must be between 1 and 1024, not {count}")
        self.count = count
        self.tags = [_tag(k, count) for k in range(count)]

    def of(self, team_id: int) -> int:
        return team_id % self.count

    def tag(self, team_id: int) -> str:
        return self.tags[team_id % self.count]


def _tag(k: int, count: int) -> str:
    """A tag whose slot lies in the k-th of `count` equal slot ranges: partitions then spread evenly over
    shards that own equal ranges, a cluster's usual layout (a hash of `p<k>` alone would bunch them)."""
    low, high = k * REDIS_CLUSTER_HASH_SLOTS // count, (k + 1) * REDIS_CLUSTER_HASH_SLOTS // count
    for i in itertools.count():
        tag = f"p{k}.{i}"
        if low <= key_slot(tag.encode()) < high:
            return tag
    raise AssertionError("unreachable")


def epoch(tag: str) -> str:
    """The newest relay epoch of the partition: older relays' publishes are refused."""
    return f"{PREFIX}{{{tag}}}:epoch"


def relay_cursor(tag: str) -> str:
    """How far in the outbox the partition's relays have published."""
    return f"{PREFIX}{{{tag}}}:relay:cursor"


def relay_stats(tag: str) -> str:
    """The partition's active relay's heartbeat and figures, for /metrics and /readyz."""
    return f"{PREFIX}{{{tag}}}:relay:stats"


def pubsub(tag: str, channel: str) -> str:
    return f"{PREFIX}{{{tag}}}:ch:{channel}"


def channel_of(pubsub_name: str) -> str:
    return pubsub_name.partition("}:ch:")[2]


def seq(tag: str, channel: str) -> str:
    return f"{PREFIX}{{{tag}}}:seq:{channel}"


def state(tag: str, channel: str) -> str:
    """The light channel's current state (a hash), written atomically with each publish."""
    return f"{PREFIX}{{{tag}}}:state:{channel}"


def history(tag: str, channel: str) -> str:
    """The channel's recent messages (MessagePack), a stream whose ids are `<seq>-0`."""
    return f"{PREFIX}{{{tag}}}:hist:{channel}"


def history_sizes(tag: str, channel: str) -> str:
    """Beside the history: where the oldest entry begins, then where each entry ends, in bytes (a list)."""
    return f"{PREFIX}{{{tag}}}:hsize:{channel}"


def finish_marker(tag: str, trajectory_id: int, wave: int) -> str:
    """Set when a wave's finish (notice and glow) has been published."""
    return f"{PREFIX}{{{tag}}}:finish:{trajectory_id}:{wave}"


def presence(team_id: int) -> str:
    """Who is online in a team: a sorted set of `<user>:<node>` scored by when the entry expires."""
    return f"{PREFIX}presence:{team_id}"


def user_sockets(user_id: int) -> str:
    """How many websockets a user holds in each process: a hash of `<sockets>:<when it lapses>` by process."""
    return f"{PREFIX}user-sockets:{user_id}"


def metrics(team_id: int) -> str:
    """The latest figures of each of a team's clusters (a hash by cluster id)."""
    return f"{PREFIX}metrics:{team_id}"


def cluster_commands(cluster_id: int) -> str:
    """The pub/sub channel on which the node holding a cluster's feed hears the commands sent to it (inside the
    gateway: a cluster holds no credential to the bus)."""
    return f"{PREFIX}feed:cluster:{cluster_id}"


def reply(tag: str, command_id: str) -> str:
    """The list a command's confirmations are pushed onto; `tag` is the waiting process's (one slot for all)."""
    return f"{PREFIX}reply:{{{tag}}}:{command_id}"


def replies_wake(tag: str) -> str:
    """Wakes a process's confirmation listener when it has a new reply list to watch."""
    return f"{PREFIX}reply:{{{tag}}}:wake"


def text(value: bytes | str) -> str:
    """Redis answers bytes (the clients here do not decode responses)."""
    return value.decode() if isinstance(value, bytes) else value
