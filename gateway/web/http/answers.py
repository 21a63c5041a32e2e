"""The JSON bodies the HTTP API answers with, as msgspec Structs: the handlers encode them, and the OpenAPI
document is generated from them (gateway.web.node.schema), so the two cannot drift apart."""

from __future__ import annotations

import msgspec
from starlette.responses import Response

from ...core.model import TrajectorySummary
from ...core.submission import SubmissionRow
from ...store.people import Finishes


class Created(msgspec.Struct):
    id: int


class Problem(msgspec.Struct):
    """Every refusal: a machine-readable `error` code and a `message` a person can read (it names the field)."""

    error: str
    message: str


class Named(msgspec.Struct):
    id: int
    name: str


class Preferences(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What the person chose in Account, kept on the server so that it follows them to another browser.
    `finishes`: which finishes reach them as a toast and a browser notification: their own ("mine"), every one
    of their teams' ("team"), or "none" (rows, the ring and the glow still tell them)."""

    finishes: Finishes


class Me(msgspec.Struct):
    """The signed-in user, their teams and the session's expiry."""

    user: Named
    teams: list[Named]
    single_user: bool
    local: bool
    demo: bool
    expires_at: int  # the session's token, in milliseconds since the Unix epoch: renew before then
    time: int  # the server's clock, to read expires_at by
    finishes: Finishes = "mine"  # which finishes reach the person (Preferences)


class TeamRole(msgspec.Struct):
    """A team of the signed-in person's and their role in it."""

    id: int
    name: str
    role: str  # owner, admin or member (every member may follow and act on the team's jobs)


class SessionRow(msgspec.Struct):
    """A session the person is signed in with: a browser, or a tool with its own token."""

    id: int  # what POST /api/account/sessions/{id}/revoke takes
    device: str  # from its User-Agent, in a few words: "Chrome on Linux", "python-httpx"
    started_at: str  # ISO 8601: when the person signed in
    last_seen_at: str  # ISO 8601: its last request or live socket (moved at most once a minute)
    current: bool  # the session of this request: "This device"


class Account(msgspec.Struct, kw_only=True):
    """The account page: who is signed in, their teams and role in each, and their active sessions, most recently
    seen first (`sessions_total` in all; the list holds the first 100)."""

    user: Named
    teams: list[TeamRole]
    sessions: list[SessionRow]
    sessions_total: int
    time: int  # the server's clock (milliseconds since the Unix epoch), to read the times by
    preferences: Preferences


class Member(msgspec.Struct):
    id: int
    name: str
    online: bool
    role: str = "member"  # owner, admin or member


class Members(msgspec.Struct, omit_defaults=True):
    """My Team: the members, and how many are online (absent in a single-user deployment); and the team's
    clusters by name, which a job row names (a job delta carries only its `cluster_id`)."""

    members: list[Member]
    online: int | None = None
    clusters: list[Named] = msgspec.field(default_factory=list)
    role: str = ""  # the caller's role in the team: owners and admins see the page's controls


class TrajectoryRow(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: int
    name: str
    created_at: str  # ISO 8601
    staging: str | None = None  # its newest upload's data while not on the cluster: uploading, syncing ...


class Trajectories(msgspec.Struct, kw_only=True):
    """A page of the team's trajectories (the dashboard's cards), newest first: `total` match the search. `summaries`
    are the live summaries of those listed with jobs (the team channel's `summary` keeps them live)."""

    total: int
    offset: int
    limit: int
    trajectories: list[TrajectoryRow]
    summaries: list[TrajectorySummary]


class ActiveTrajectories(msgspec.Struct, kw_only=True):
    """A page of the trajectories with jobs listed (the Jobs popover), most recent change first: `total` match."""

    total: int
    offset: int
    limit: int
    summaries: list[TrajectorySummary]


class AnalysisRow(msgspec.Struct, kw_only=True):
    """One analysis of a trajectory (a plugin of a pipeline run) and its frames: `frames` jobs, of which
    `completed` are done, `failed` failed (preempted ones included), `running` and `queued` still at work, and
    `silent` unfinished on a cluster that stopped reporting, `holding` of the queued waiting for a person; `clusters` names the clusters its unfinished jobs
    are on (Delete analysis stops them there)."""

    id: int
    plugin: str
    created_at: str  # ISO 8601: when its pipeline run started it
    frames: int
    completed: int
    failed: int
    running: int
    queued: int
    silent: int = 0
    holding: int = 0
    clusters: list[str] = []


class Analyses(msgspec.Struct):
    """The analysis listing: a trajectory's analyses, newest first (at most 200)."""

    analyses: list[AnalysisRow]


class Users(msgspec.Struct):
    """Demo mode: the users to pick from."""

    users: list[Named]


class Done(msgspec.Struct):
    ok: bool = True


class ConfirmationTaken(msgspec.Struct):
    """A cluster's confirmation, recorded; `repeated`: it was confirmed before, and nothing changed."""

    repeated: bool


class Renewed(msgspec.Struct):
    """A new session cookie was set; when it expires, and the server's clock (milliseconds since the epoch)."""

    ok: bool
    expires_at: int
    time: int


encoder = msgspec.json.Encoder()


def answer(body: msgspec.Struct, status: int = 200) -> Response:
    """A JSON answer encoded from its Struct (the type the OpenAPI document names for it)."""
    return Response(encoder.encode(body), status, media_type="application/json")


class SubmissionWindow(msgspec.Struct, kw_only=True):
    """A window of the Submissions page: `total` rows match the filters, `rows` are those from `offset` on, in
    the order asked for. Keep it live with the team channel's `summary` rows. `total` is exact up to 100,000; past
    it `total_exact` is false and `total` is PostgreSQL's estimate (say it as one: "about 1.2 million")."""

    total: int
    total_exact: bool = True
    offset: int
    limit: int
    sort: str
    dir: str
    rows: list[SubmissionRow]


class SubmissionWindowOut(msgspec.Struct, kw_only=True):
    """`SubmissionWindow` as it is sent: the rows as saved, JSON written once by the relay, never decoded here."""

    total: int
    total_exact: bool
    offset: int
    limit: int
    sort: str
    dir: str
    rows: list[msgspec.Raw]


class Projects(msgspec.Struct):
    """The team's projects, in order (the Submissions page's filter; at most 1,000)."""

    projects: list[str]
