"""Demo data: a team with members, clusters and trajectories, and the keys to act as its clusters."""

from __future__ import annotations

from dataclasses import dataclass, field

from .credentials import demo_cluster_key
from .store import clusters, seed
from .store.connections import connect
from .store.seed import Unfinished

MEMBERS = ["Ada Lovelace", "Rosalind Franklin", "Linus Pauling", "Dorothy Hodgkin", "Max Perutz"]
TRAJECTORIES = ["Lipid bilayer 310K", "Ubiquitin folding", "KcsA ion channel", "Water box NPT", "Lysozyme in salt"]
CLUSTERS = ["gpu-1", "gpu-2", "cpu-big"]

__all__ = ["CLUSTERS", "MEMBERS", "TRAJECTORIES", "Seeded", "Unfinished", "seed_demo"]


@dataclass
class Seeded:
    team_id: int
    user_ids: list[int]
    cluster_ids: list[int]
    cluster_keys: dict[int, str] = field(default_factory=dict)  # the keys the demo holds, to act as its clusters
    # Clusters whose key is not the demo's (re-keyed by a person, or seeded under another secret): their key is
    # kept, whoever holds it keeps working, and the demo does not act as them.
    kept_keys: list[int] = field(default_factory=list)
    trajectory_ids: list[int] = field(default_factory=list)
    other_team_id: int = 0
    other_user_id: int = 0
    # What the last run left half-way, for the clusters to take up again (else it would look stuck for good).
    unfinished: list[Unfinished] = field(default_factory=list)
    # What it finished, for the clusters to keep as they keep their own (a retry of an old failure runs it again).
    finished: list[Unfinished] = field(default_factory=list)
    # submission id -> its staging state short of ready, and the cluster staging it (None: any of the team's)
    staging: dict[int, tuple[str, int | None]] = field(default_factory=dict)


async def seed_demo(dsn: str, secret: str) -> Seeded:
    """Create the demo team once; later runs find it. Its clusters' keys follow from `secret` (the demo's, kept in
    its data folder) and are stored once, when a cluster has none: a restart re-keys nothing, so each run hands out
    the keys the last one did, and a key a person issued since stays the cluster's."""
    db = await connect(dsn)
    try:
        async with db.transaction():
            team_id = await seed.demo_team(db)
            if team_id is None:
                team_id = await seed.create_demo_teams(db, MEMBERS, CLUSTERS, TRAJECTORIES)
            users = await seed.member_ids(db, team_id)
            cluster_ids = await seed.cluster_ids(db, team_id)
            trajectories = await seed.empty_trajectories(db, team_id)
            other_team, other_user = await seed.other_team(db)
            seeded = Seeded(
                team_id,
                users,
                cluster_ids,
                trajectory_ids=trajectories,
                other_team_id=other_team,
                other_user_id=other_user,
            )
            stored = await clusters.key_hashes(db, cluster_ids)
            for cid in cluster_ids:
                key, key_hash = demo_cluster_key(secret, cid)
                if stored.get(cid) is None:  # a new cluster: its key is issued once
                    await clusters.set_key_hash(db, cid, key_hash)
                elif stored[cid] != key_hash:  # re-keyed since (Clusters page, `cluster-key`), or another secret
                    seeded.kept_keys.append(cid)
                    continue
                seeded.cluster_keys[cid] = key
            seeded.unfinished = await seed.unfinished(db, team_id)
            seeded.finished = await seed.finished(db, team_id)
            seeded.staging = await seed.staging(db, team_id)
            return seeded
    finally:
        await db.close()
