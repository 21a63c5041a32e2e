-- The analysis listing, and submissions that name their cluster and its instance types (#20).
--
-- An analysis knows when its pipeline run started it (the listing shows it, and same-named jobs of two runs
-- are told apart by it) and when it was deleted: Delete analysis keeps the row, so the jobs that name it
-- still do, but it leaves the listing.

alter table analyses add column created_at timestamptz not null default now();
alter table analyses add column deleted_at timestamptz;
-- Analyses registered before this migration started when their first job was created.
update analyses a set created_at = j.first
from (select analysis_id, min(created_at) as first from jobs where analysis_id is not null group by analysis_id) j
where j.analysis_id = a.id;
create index analyses_trajectory on analyses (trajectory_id, created_at desc) where deleted_at is null;
create index jobs_analysis on jobs (analysis_id) where removed_at is null and analysis_id is not null;

-- The cluster that stages a submission's data and runs its tasks: Retry Sync asks that one (and names it when
-- it does not confirm), Edit / Instance Type offers its instance types. Null for a submission written before.
alter table submissions add column cluster_id bigint;
alter table submissions add constraint submissions_cluster_team foreign key (cluster_id, team_id)
    references clusters (id, team_id) not valid;

-- A derived submission (a plain INSERT of a job) is the cluster's that runs that job.
create or replace function jobs_submission() returns trigger language plpgsql as $$
declare
    work text;
    found bigint;
begin
    if new.submission_id is not null then
        return new;
    end if;
    work := case when new.kind in ('preprocess', 'rasterize') then 'upload'
                 when new.kind in ('analysis', 'artifact_upload') then 'analysis'
                 else 'transfer' end;
    select id into found from submissions where team_id = new.team_id and key = 'trajectory:' || new.trajectory_id || ':' || work;
    if found is null then
        insert into submissions (team_id, trajectory_id, key, title, cluster_id)
        select new.team_id, new.trajectory_id, 'trajectory:' || new.trajectory_id || ':' || work,
               t.name || case work when 'upload' then ' — upload' when 'analysis' then ' — analyses' else ' — transfers' end,
               new.cluster_id
        from trajectories t where t.id = new.trajectory_id
        on conflict (team_id, key) do update set key = excluded.key
        returning id into found;
    end if;
    new.submission_id := found;
    return new;
end $$;

-- The kinds of render node a cluster offers (`POST /api/ingest/instance-types` replaces its list). Edit /
-- Instance Type offers these and the API refuses any other; a preemptible type makes a submission PREEMPTIBLE.
create table instance_types (
    cluster_id  bigint not null references clusters (id) on delete cascade,
    name        text not null check (name <> '' and length(name) <= 64),
    cores       integer not null check (cores between 1 and 1024),
    memory_gb   integer not null check (memory_gb between 1 and 16384),
    preemptible boolean not null default false,
    primary key (cluster_id, name)
);
