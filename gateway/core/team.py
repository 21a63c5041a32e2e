"""The team channel's live extras: who is online, and how busy the team's clusters are."""

from __future__ import annotations

from typing import Annotated

import msgspec

STALE_AFTER = 5.0  # a cluster silent for longer is left out of the averages
CPU_HIGH = 85.0  # CPU shows red at this average or more


class Presence(msgspec.Struct):
    """`3 / 5 online`: members with an open view of the team, across every gateway node (each user once)."""

    online: int
    members: int
    users: list[int]


class MetricsReport(msgspec.Struct, forbid_unknown_fields=True):
    """A cluster's figures, about once a second: percentages, and network in MB/s."""

    cpu: Annotated[float, msgspec.Meta(ge=0, le=100)]
    memory: Annotated[float, msgspec.Meta(ge=0, le=100)]
    disk: Annotated[float, msgspec.Meta(ge=0, le=100)]
    network: Annotated[float, msgspec.Meta(ge=0, le=1e6)]


class ClusterFigures(msgspec.Struct, kw_only=True):
    id: int
    name: str
    cpu: float
    memory: float
    disk: float
    network: float
    at: float  # when it reported, seconds since the Unix epoch
    live: bool = True


class ClusterStats(msgspec.Struct, kw_only=True):
    """Averages over the clusters reporting live metrics, how many report, and each cluster's figures."""

    reporting: int
    cpu: float | None
    memory: float | None
    disk: float | None
    network: float | None
    cpu_high: bool
    clusters: list[ClusterFigures]


def cluster_stats(reports: list[ClusterFigures], now: float) -> ClusterStats:
    figures = []
    for r in sorted(reports, key=lambda r: r.name):
        figures.append(msgspec.structs.replace(r, live=now - r.at <= STALE_AFTER))
    live = [f for f in figures if f.live]

    def average(name: str) -> float | None:
        return round(sum(getattr(f, name) for f in live) / len(live), 1) if live else None

    cpu = average("cpu")
    return ClusterStats(
        reporting=len(live),
        cpu=cpu,
        memory=average("memory"),
        disk=average("disk"),
        network=average("network"),
        cpu_high=cpu is not None and cpu >= CPU_HIGH,
        clusters=figures,
    )


def same_stats(a: ClusterStats | None, b: ClusterStats) -> bool:
    """Whether publishing `b` after `a` would tell anyone anything new (report times aside)."""
    if a is None:
        return False
    strip = lambda s: [(c.id, c.cpu, c.memory, c.disk, c.network, c.live) for c in s.clusters]  # noqa: E731
    return (a.reporting, a.cpu, a.memory, a.disk, a.network, strip(a)) == (
        b.reporting,
        b.cpu,
        b.memory,
        b.disk,
        b.network,
        strip(b),
    )
