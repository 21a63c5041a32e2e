"""Instance types: a cluster declares the kinds of render node it offers; Edit / Instance Type offers those.

`POST /api/ingest/instance-types` (a cluster key) replaces the cluster's list. `GET
/api/submissions/instance-types?submission=1&submission=2` (a member) answers the types every cluster holding
those submissions offers: the Edit / Instance Type dialog's choices, the same list the action is checked against.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...core.instance_types import InstanceType, InstanceTypes, Offered, common
from ...core.types import is_id
from ...store import clusters, instance_types
from ...store.types import Pool
from ..http.answers import answer
from ..http.guards import Refused, cluster, decode, endpoint, runtime_of, user

_decoder = msgspec.json.Decoder(InstanceTypes)
MAX_SELECTED = 1000


@endpoint
async def declare_instance_types(request: Request) -> Response:
    who = await cluster(request)
    body = await decode(request, _decoder)
    names = [t.name for t in body.instance_types]
    if len(set(names)) != len(names):
        raise Refused(422, "invalid", "instance_types: each name once")
    await instance_types.replace(runtime_of(request).pool, who.id, body.instance_types)
    return Response(status_code=204)


@endpoint
async def submission_instance_types(request: Request) -> Response:
    user_id = user(request)
    raw = request.query_params.getlist("submission")
    if not raw or len(raw) > MAX_SELECTED:
        raise Refused(422, "invalid", f"submission: name 1 to {MAX_SELECTED} submissions")
    ids = []
    for i, value in enumerate(raw):
        if not value.isascii() or not value.isdigit() or not is_id(int(value)):
            raise Refused(422, "invalid", f"submission[{i}]: expected an id")
        ids.append(int(value))
    pool = runtime_of(request).pool
    teams = await instance_types.teams_of_submissions(pool, ids, user_id)
    for i, sid in enumerate(ids):
        if sid not in teams:
            raise Refused(403, "forbidden", f"submission[{i}]: no submission {sid} in your teams")
    if len(set(teams.values())) > 1:
        raise Refused(422, "invalid", "select submissions of one team")
    return answer(await offered(pool, next(iter(teams.values())), ids))


async def offered(pool: Pool, team_id: int, submissions: list[int]) -> Offered:
    """The types every cluster holding these submissions offers: each submission's own cluster, else the clusters
    of its tasks, else (nothing runs it yet) any of the team's clusters."""
    holders = await instance_types.holders(pool, team_id, submissions)
    names = await clusters.team_clusters_by_name(pool, team_id)
    types: dict[int, dict[str, InstanceType]] = {c: {} for c in names}
    for cluster_id, t in await instance_types.team_types(pool, team_id):
        types[cluster_id][t.name] = t
    held = {h.cluster_id for h in holders if h.cluster_id in names}
    unplaced = set(submissions) - {h.submission_id for h in holders}
    if unplaced or not held:  # a submission no cluster runs yet may go to any of them
        union: dict[str, InstanceType] = {}
        for c in names:
            for name, t in types[c].items():
                union.setdefault(name, t)
        offers = [union] + [types[c] for c in sorted(held)]
        return Offered(instance_types=common(offers), clusters=sorted(names[c] for c in (held or names)))
    return Offered(instance_types=common(types[c] for c in sorted(held)), clusters=sorted(names[c] for c in held))
