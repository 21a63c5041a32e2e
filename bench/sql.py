"""Every SQL statement the benchmarks run, by name: what they write to build a world and load it, and what they read
to judge it. The rest of bench/ holds no SQL (tests/unit/test_bench_apart.py holds the rule), so a change of the
schema (gateway/store/migrations/) is followed here, in one place. The peers' own SQL (broadcaster-pg's NOTIFY
trigger, bench/peers/notify_trigger.py) is part of the system compared and stays with it.

Each is run by its caller as `pool.fetch(sql.NAME, ...)`; those whose text depends on an argument that cannot be a
query parameter (a column, a database's name, a sort direction) are functions.
"""

from __future__ import annotations

# --- Databases (bench/infra.py, bench/notify_cost.py)


def create_database(name: str) -> str:
    return f'create database "{name}"'


def drop_database(name: str, force: bool = False) -> str:
    return f'drop database if exists "{name}"' + (" with (force)" if force else "")


# --- A world: teams with a member and a cluster each, trajectories with their jobs (bench/load.py)

NEW_TEAM = "insert into teams (name) values ($1) returning id"
NEW_USER = "insert into users (name) values ($1) returning id"
NEW_MEMBERSHIP = "insert into memberships values ($1, $2)"
NEW_MEMBERSHIPS = "insert into memberships select $1, unnest($2::bigint[])"  # $2: the users
NEW_CLUSTER = "insert into clusters (team_id, name) values ($1, 'bench') returning id"
NEW_TRAJECTORY = "insert into trajectories (team_id, name) values ($1, $2) returning id"
NEW_ANALYSIS = "insert into analyses (trajectory_id, plugin) values ($1, $2) returning id"
NEW_JOBS = (
    "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
    " select $1, $2, $3, 'preprocess', 'Preprocess frame ' || f, f from generate_series(0, $4 - 1) f"
    " returning id"
)
TEAM_CLUSTER = "select id from clusters where team_id = $1 limit 1"

# --- The writer's load (bench/load.py, bench/relay_cost.py)

# A changed job's whole row, from which the tap encodes what the gateway's wire carries.
RETURNING = " returning j.id, j.status, to_jsonb(j)::text as job"
# The jobs of $1 locked in id order before an `update jobs j ... from locked where j.id = locked.id`, as the
# ingest locks them: concurrent writers whose samples overlap would otherwise lock them in the scan's (physical)
# order and deadlock each other.
LOCKED = "with locked as (select id from jobs where id = any($1::bigint[]) order by id for update)"
# One transaction of the steady load: each job of $1 moves on to its next status.
NEXT_STATUSES = (
    f"{LOCKED} update jobs j set status = case status when 'queued' then 'running'"
    f" when 'running' then 'completed' else 'queued' end from locked where j.id = locked.id{RETURNING}"
)
# The jobs of $1 set to status $2, locked in id order (relay_cost's writers).
SET_STATUS_LOCKED = LOCKED + " update jobs j set status = $2 from locked where j.id = locked.id"
# The jobs of $1 set to status $2.
SET_STATUS = "update jobs set status = $2 where id = any($1::bigint[])"
# An upload: frames $6..$7 of a kind ($4, named $5, of analysis $8) created queued on trajectory $2.
UPLOAD_JOBS = (
    "insert into jobs as j (team_id, trajectory_id, cluster_id, kind, name, frame, analysis_id)"
    " select $1, $2, $3, $4, $5 || ' frame ' || f, f, $8 from generate_series($6::int, $7::int) f" + RETURNING
)
UPLOAD_STATUS = "update jobs j set status = $2 where id = any($1::bigint[])" + RETURNING
# A fresh trajectory's jobs moved into the writer's mix of statuses: those whose id % 3 is among $3 to status $2.
MIX_STATUSES = "update jobs set status = $2 where trajectory_id = $1 and id % 3 = any($3::int[])"
# A trajectory's listed jobs, whole, as a snapshot reads them (the tap's kept state).
TRAJECTORY_ROWS = (
    "select to_jsonb(j)::text as job from jobs j where trajectory_id = $1 and removed_at is null order by id"
)

# --- What subscribers must end at (bench/load.py, bench/faults/)

TEAM_COUNTS = (
    "select job_listed_status(status, silent_since) as status, count(*) as n from jobs"
    " where team_id = $1 and removed_at is null group by 1"
)
TEAM_JOBS_AMONG = "select id, version, status from jobs where team_id = $1 and id = any($2::bigint[])"
TRAJECTORY_JOBS = "select id, version, status from jobs where trajectory_id = $1 and removed_at is null"


def listed_jobs(of_team: bool) -> str:
    """The listed jobs of one team ($1), or of one trajectory."""
    column = "team_id" if of_team else "trajectory_id"
    return f"select id, status, version from jobs where {column} = $1 and removed_at is null"


# --- Markers: a job per trajectory moved to a status the load never writes (bench/markers.py)

NEW_MARKERS = (
    "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, status)"
    " select $1, $2, id, 'preprocess', 'Marker', 0, $3 from clusters where team_id = $1 returning id"
)
MOVE_MARKERS = "update jobs set status = $2 where id = any($1::bigint[]) returning id, version, trajectory_id"

# --- The single measures (bench/quiet_latency.py, bench/relay_cost.py, bench/notify_cost.py, bench/exports.py)

RENAME_JOB = "update jobs set name = $2 where id = $1 returning version"
OUTBOX_BACKENDS = (
    "select pid from pg_stat_activity where application_name = 'gateway-relay-outbox' and datname = current_database()"
)
LAST_CHANGE = "select coalesce(max(seq), 0) from job_changes"
CHANGES_SINCE = "select count(*) from job_changes where seq > $1"
# notify_cost's world: one team, cluster and trajectory, 10,000 jobs; its writers flip one job a transaction.
NOTIFY_COST_WORLD = (
    "insert into teams (name) values ('bench'); insert into users (name) values ('b');"
    "insert into clusters (team_id, name) values (1, 'c'); insert into trajectories (team_id, name) values (1, 't')"
)
NOTIFY_COST_JOBS = (
    "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
    " select 1, 1, 1, 'preprocess', 'f', g from generate_series(1, 10000) g"
)
RELAY_SLEEPING = "update relay_wakeup set sleeping = $1"
FLIP_QUEUED = "update jobs set status = case status when 'queued' then 'running' else 'queued' end where id = $1"
# exports' readers: $1 users named 'reader <i> <$2>', their ids.
NEW_READERS = "insert into users (name) select 'reader ' || i || ' ' || $2 from generate_series(1, $1) i returning id"
WATCHER = "insert into users (name) values ('Watcher of every team') returning id"

# --- The Submissions page and the dashboard at scale (bench/views/)

NEW_ARTISTS = (
    "insert into users (name) select 'artist ' || lpad(i::text, 2, '0') from generate_series(2, $1) i returning id"
)
# Plain SQL, as the platform writes: users, projects, titles, priorities, sizes and staging spread over the rows;
# one in 50 submitted by a cluster (no user), created a second apart up to now.
INSERT_SUBMISSIONS = """
insert into submissions (team_id, user_id, project, title, priority, cores, memory_gb, preemptible, staging,
                         instance_type, created_at)
select $1,
       case when i % 50 = 0 then null else ($2::bigint[])[1 + (i * 7) % cardinality($2::bigint[])] end,
       'project-' || lpad(((i * 13) % $5)::text, 2, '0'),
       ($6::text[])[1 + i % cardinality($6::text[])] || ' shot ' || lpad(i::text, 6, '0'),
       (i * 37) % 100,
       (array[2, 4, 8, 16, 32])[1 + i % 5],
       (array[8, 16, 32, 64, 128])[1 + (i / 5) % 5],
       i % 3 = 0,
       case when i % 97 = 0 then 'uploading' when i % 89 = 0 then 'sync_failed' when i % 83 = 0 then 'syncing'
            else 'ready' end,
       case when i % 3 = 0 then 'spot' else 'standard' end,
       now() - ($7 - i) * interval '1 second'
from generate_series($3::int, $4::int) i
"""
SUBMISSION_IDS = "select min(id), max(id) from submissions where team_id = $1"
# Analysis tasks on every `every`-th submission, 1 to 7 each, in one of six mixes (all done, one running, all
# queued, one failed, half queued, held with one preempted), the finished ones taking 1 to 120 s.
INSERT_JOBS = """
insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status, started_at)
select $1, $2, $3, 'analysis', 'Analysis frame', f, s.id, st.status,
       case when st.status in ('completed', 'failed') then now() - (1 + (s.n * 31 + f * 17) % 120) * interval '1 second' end
from (select id, id - $7 as n from submissions where team_id = $1 and id >= $4 and id <= $5) s
cross join lateral generate_series(0, (s.n % 7)::int) f
cross join lateral (select case (s.n / $6) % 6
    when 0 then 'completed'
    when 1 then case when f = 0 then 'running' else 'completed' end
    when 2 then 'queued'
    when 3 then case when f = 0 then 'failed' else 'completed' end
    when 4 then case when f % 2 = 0 then 'completed' else 'queued' end
    else case when f = 0 then 'preempted' else 'holding' end end as status) st
where s.n % $6 = 0
"""


def submissions_without_tasks(newest: bool) -> str:
    """The newest (or oldest) $5 ready submissions of team $1 holding no task by INSERT_JOBS's rule ((id - $2) %
    $3 <> 0) and not among $4."""
    return (
        "select id from submissions where team_id = $1 and staging = 'ready' and trajectory_id is null"
        " and (id - $2) % $3 <> 0 and id <> all($4::bigint[])"
        f" order by id {'desc' if newest else 'asc'} limit $5"
    )


# Trajectories a minute apart up to now, named "<title> run 0001" and on.
INSERT_TRAJECTORIES = """
insert into trajectories (team_id, name, created_at)
select $1, ($2::text[])[1 + i % cardinality($2::text[])] || ' run ' || lpad(i::text, 4, '0'),
       now() - ($3 - i) * interval '1 minute'
from generate_series(1, $3::int) i
returning id
"""
# Every job belongs to a submission (one named by none is derived, one per trajectory): each trajectory's jobs are
# one of the N submissions (the oldest ready ones without tasks), its pipeline run.
LINK_TRAJECTORIES = """
update submissions s set trajectory_id = t.id
from unnest($2::bigint[], $3::bigint[]) t(id, submission)
where s.id = t.submission and s.team_id = $1
"""
# `per` jobs on each trajectory, in one of five mixes: all done, a quarter running, all queued, a tenth failed,
# half done and half queued.
INSERT_TRAJECTORY_JOBS = """
insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, timestep, status, submission_id)
select $1, t.id, $2, 'analysis', 'Common Neighbor Analysis', f, f * 0.5,
       case t.id % 5
           when 0 then 'completed'
           when 1 then case when f % 4 = 0 then 'running' else 'completed' end
           when 2 then 'queued'
           when 3 then case when f % 10 = 0 then 'failed' else 'completed' end
           else case when f < $4 / 2 then 'completed' else 'queued' end end,
       t.submission
from unnest($3::bigint[], $5::bigint[]) t(id, submission)
cross join generate_series(0, $4 - 1) f
"""
INSERT_STREAM_TASKS = """
insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status)
select $1, $2, $3, 'analysis', 'Analysis frame', t.frame, t.submission, t.status
from unnest($4::bigint[], $5::int[], $6::text[]) t(submission, frame, status)
returning id, status
"""
TEAM_JOB_COUNT = "select count(*) from jobs where team_id = $1 and removed_at is null"
SAVED_ROWS = "select count(*), coalesce(sum(tasks), 0) from submission_rows where team_id = $1"
# One batch of the stream: each task flips, running to completed or completed to running.
FLIP = (
    "update jobs set status = case when status = 'running' then 'completed' else 'running' end"
    " where id = any($1::bigint[])"
)
# The streamed submissions whose saved row does not count their completed tasks yet (0: the relay caught up).
BEHIND = """
select count(*) from (
    select submission_id, count(*) filter (where status = 'completed') as completed
    from jobs where submission_id = any($1::bigint[]) and removed_at is null group by submission_id) j
join submission_rows r on r.id = j.submission_id
where round(r.progress * r.tasks) <> j.completed
"""
# The rows a window must count, by plain conditions (not the store's WHERE): statuses $2, projects $3, users $4,
# a search $5 (lower case) in the title, project or user's name.
EXPECTED_TOTAL = (
    "select count(*) from submission_rows where team_id = $1"
    " and ($2::text[] = '{}' or status = any($2)) and ($3::text[] = '{}' or project = any($3))"
    " and ($4::bigint[] = '{}' or user_id = any($4))"
    " and ($6 = '' or exists (select 1 from (select regexp_split_to_array(lower(title || ' ' || project || ' '"
    "      || user_name), '[^[:alnum:]]+') as w) r where w @> $5::text[] and exists ("
    "      select 1 from unnest(w) u where starts_with(u, $6))))"
)  # a search's words ($5, the last $6 at least begun) among the words of the title, project and user's name
TRAJECTORIES_NAMED = "select count(*) from trajectories where team_id = $1 and name ilike $2"
FIRST_BY_PRIORITY = "select id from submission_rows where team_id = $1 order by priority, id limit 1"
ROWS_TABLE_PAGES = "select relpages, relallvisible from pg_class where relname = 'submission_rows'"
AUTOVACUUM = "show autovacuum"
ANALYZE_ROWS = "analyze submission_rows"
ANALYZE_CARDS = "analyze submissions, trajectories"
VACUUM_ROWS = "vacuum (analyze) submission_rows"
TOUCH_JOBS = "update jobs set name = name || '.' where id = any($1::bigint[])"  # a change each (bench/memory_back.py)
ROWS_WITH_TOTALS = "select count(*) from submission_rows where time_n is not null"  # saved with sql/023's totals


def count_every_row(where: str) -> str:
    """A window's total as it was read before the windows counted to EXACT_TO at most (bench/views/plans.py)."""
    return f"select count(*) from submission_rows where {where}"


# The cards' page statement as gateway.store.people.trajectories() runs it (a copy: EXPLAINed, never served).
CARDS_PAGE = (
    "select t.id, t.name, t.created_at, (select s.staging from submissions s where s.trajectory_id = t.id"
    "  and s.team_id = t.team_id and s.staging <> 'ready' order by s.created_at desc limit 1) as staging"
    " from trajectories t where team_id = $1 order by created_at desc, id desc limit {limit} offset {offset}"
)


def explained(statement: str, analyze: bool = False) -> str:
    """`statement`'s plan as JSON (with `analyze`, run, with its timings)."""
    return f"explain ({'analyze, ' if analyze else ''}format json) {statement}"
